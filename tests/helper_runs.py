"""Run a script of tests/helpers/ in a fresh Python process and read its JSON answer;
run scripts/train.py in one and read its one ``error:`` line.

The helpers set their own host device count (``XLA_FLAGS`` before JAX starts), so the
caller's ``XLA_FLAGS`` is dropped and the CPU platform is named (on a machine with an
accelerator JAX would otherwise pick it); a helper prints one JSON object as its last line.
"""

import json
import os
import signal
import subprocess
import sys

HELPERS = os.path.join(os.path.dirname(__file__), 'helpers')
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_signals() -> None:
  """``preexec_fn`` of a process a test signals: SIGHUP's default action (stop the process),
  also when the tests run under ``nohup``, whose ignored SIGHUP a child would inherit."""
  signal.signal(signal.SIGHUP, signal.SIG_DFL)


def run_helper(name: str, timeout: int = 600) -> dict:
  """The last stdout line of ``tests/helpers/<name>`` as JSON (asserts exit status 0)."""
  env = dict(os.environ, JAX_PLATFORMS='cpu')  # forced host devices, also beside a GPU
  env.pop('XLA_FLAGS', None)
  proc = subprocess.run(
    [sys.executable, os.path.join(HELPERS, name)],
    capture_output=True,
    text=True,
    env=env,
    timeout=timeout,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def run_train(workdir, *args, timeout=300, **env):
  """``scripts/train.py --workdir=<workdir> <args>`` on the CPU from the repository root, with
  ``env`` added to the environment: ``(exit status, stdout + stderr)``."""
  proc = subprocess.run(
    [sys.executable, 'scripts/train.py', f'--workdir={workdir}', *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
    env={**os.environ, 'JAX_PLATFORMS': 'cpu', **env},
  )
  return proc.returncode, proc.stdout + proc.stderr


def one_error_line(rc, out, *fragments):
  """The one ``error:`` line of a run that failed without a traceback; it holds ``fragments``."""
  assert rc == 1, (rc, out)  # a user error exits with status 1
  assert 'Traceback' not in out, out
  errors = [line for line in out.splitlines() if line.startswith('error:')]
  assert len(errors) == 1, out
  for f in fragments:
    assert f in errors[0], errors[0]
  return errors[0]
