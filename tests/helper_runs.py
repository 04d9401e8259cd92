"""Run a script of tests/helpers/ in a fresh Python process and read its JSON answer.

The helpers set their own host device count (``XLA_FLAGS`` before JAX starts), so the
caller's ``XLA_FLAGS`` is dropped and the CPU platform is named (on a machine with an
accelerator JAX would otherwise pick it); a helper prints one JSON object as its last line.
"""

import json
import os
import subprocess
import sys

HELPERS = os.path.join(os.path.dirname(__file__), 'helpers')


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
