"""Two processes, one run, through JAX's distributed runtime: the iterates of one process.

tests/helpers/distributed_run.py twice on localhost (one CPU device each, gloo
collectives): FedBuff and AsynFL with the client axis (and AsynFL's per-client state)
over both processes, AsynFL's orbax checkpoint written by both and resumed, and a sweep
of 2 replicas with the replica axis over both; then scripts/train.py as 2 processes.
"""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import distributed_run

HELPER = os.path.join(os.path.dirname(__file__), 'helpers', 'distributed_run.py')
TIMEOUT_S = 240  # generous: the pair runs in ~10-60 s on 2 busy cores


def _free_port() -> int:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _two_processes(command, logs: list[str], env: dict, cwd=None, what='2-process run') -> list:
  """``command(process_id, port)`` for processes 0 and 1 (output to ``logs``) until both end,
  one fails or TIMEOUT_S passes; fails the test then (skips it where the jaxlib has no gloo
  CPU collectives). Returns the processes' outputs."""
  port = _free_port()
  procs = []
  for pid, name in enumerate(logs):
    with open(name, 'w') as log:  # a file: never blocks
      procs.append(
        subprocess.Popen(command(pid, port), env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
      )
  deadline = time.monotonic() + TIMEOUT_S
  try:
    while any(p.poll() is None for p in procs):
      failed = [p for p in procs if p.poll() not in (None, 0)]
      if failed or time.monotonic() > deadline:
        break  # one died (the other would wait for it at a barrier) or time is up
      time.sleep(0.2)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
      p.wait()
  texts = [open(name).read() for name in logs]
  if time.monotonic() > deadline:
    pytest.fail(f'{what} exceeded {TIMEOUT_S} s; logs:\n' + '\n---\n'.join(texts))
  codes = [p.returncode for p in procs]
  if any(codes):
    text = '\n---\n'.join(t[-3000:] for t in texts)
    gloo = 'gloo' in text.lower() and ('not available' in text or 'unsupported' in text.lower())
    if gloo and what == '2-process run':
      pytest.skip(f'this jaxlib has no gloo CPU collectives: {text[-500:]}')
    pytest.fail(f'{what} failed with exit codes {codes}:\n{text}')
  return texts


def _run_pair(out_dir: str) -> list[dict]:
  """Both processes of the helper running every case, each process's arrays."""
  env = dict(os.environ)
  env.pop('XLA_FLAGS', None)
  _two_processes(
    lambda pid, port: [
      sys.executable,
      HELPER,
      '--num_processes=2',
      f'--process_id={pid}',
      f'--coordinator=127.0.0.1:{port}',
      f'--out={out_dir}',
      f'--cases={",".join(distributed_run.ALL_CASES)}',
      '--timeout=120',
      f'--checkpoint_dir={os.path.join(out_dir, "ckpt")}',
    ],
    [os.path.join(out_dir, f'process_{i}.log') for i in range(2)],
    env,
  )
  arrays = [dict(np.load(os.path.join(out_dir, f'process_{i}.npz'))) for i in range(2)]
  for i, a in enumerate(arrays):
    assert int(a['process_index']) == i
    assert int(a['process_count']) == 2
    assert int(a['global_devices']) == 2 and int(a['local_devices']) == 1
  return arrays


def _max_differences(procs: list[dict], reference: dict) -> dict[str, float]:
  """max |2-process - 1-process| over params and client leaves, per run (both processes)."""
  diffs = {}
  for name, ref in reference.items():
    for arrays in procs:
      got = arrays[f'{name}/params']
      assert got.shape == ref['params'].shape, (name, got.shape, ref['params'].shape)
      diff = float(np.max(np.abs(got - ref['params'])))
      for j, leaf in enumerate(ref['clients']):
        diff = max(diff, float(np.max(np.abs(arrays[f'{name}/client_{j}'] - leaf))))
      diffs[name] = max(diffs.get(name, 0.0), diff)
    # Replicated outputs are the same on both processes, bit for bit.
    np.testing.assert_array_equal(procs[0][f'{name}/params'], procs[1][f'{name}/params'])
    assert float(np.max(np.abs(ref['params'][..., -1, :]))) > 1e-3, name  # the run moved
  return diffs


def test_two_processes_match_one_process(tmp_path):
  procs = _run_pair(str(tmp_path))
  diffs = _max_differences(procs, distributed_run.run_cases(cases=distributed_run.ALL_CASES))
  assert set(diffs) == set(distributed_run.ALL_CASES)
  assert max(diffs.values()) <= 1e-5, diffs  # float32 round-off of cross-process sums
  # Orbax checkpoint written by both processes after chunk 1 (4 steps), restored into a
  # fresh state on both, then continued: the same iterates as the uninterrupted run.
  for arrays in procs:
    np.testing.assert_array_equal(arrays['asynfl/resumed'], arrays['asynfl/params'][4:])
  assert os.path.isdir(tmp_path / 'ckpt' / 'asynfl' / 'checkpoints' / '4')


# ---- scripts/train.py in 2 processes: one set of outputs (process 0 writes) ----------------
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'scripts', 'train.py')
TRAIN_ARGS = [
  f'--config={os.path.join(ROOT, "configs", "digits_smoke.py")}',
  '--config.num_rounds=8',
  '--config.eval_every=4',
  '--config.checkpoint_every=4',
  '--config.eval_train_samples=100',
]


def _train_env() -> dict:
  env = dict(os.environ, AFL_JAX_CPU_DEVICES='1', JAX_PLATFORMS='cpu')
  env.pop('XLA_FLAGS', None)
  return env


def _train_pair(workdir: str, logs: str, *extra: str) -> list[str]:
  """scripts/train.py as 2 processes into one workdir; fails the test if either fails."""
  n = len(os.listdir(logs))
  return _two_processes(
    lambda pid, port: [
      sys.executable,
      TRAIN,
      *TRAIN_ARGS,
      f'--workdir={workdir}',
      *extra,
      '--num_processes=2',
      f'--process_id={pid}',
      f'--coordinator=127.0.0.1:{port}',
    ],  # fmt: skip
    [os.path.join(logs, f'train_{n + pid}_{pid}.log') for pid in range(2)],
    _train_env(),
    cwd=ROOT,
    what='2-process train',
  )


def _outputs(workdir: str) -> dict[str, int]:
  """Relative path -> count, with TensorBoard event files counted under one name."""
  out: dict[str, int] = {}
  for root, _, files in os.walk(workdir):
    for f in files:
      rel = os.path.relpath(os.path.join(root, f), workdir)
      if rel.startswith('checkpoints' + os.sep) and rel.split(os.sep)[1].isdigit():
        rel = os.path.join('checkpoints', rel.split(os.sep)[1], '...')  # orbax internals
      elif f.startswith('events.out.tfevents'):
        rel = os.path.join(os.path.dirname(rel), 'events.out.tfevents.*')
      out[rel] = out.get(rel, 0) + 1
  return {k: (v if not k.endswith('...') else 1) for k, v in out.items()}


@pytest.mark.skipif(
  os.environ.get('CI') == 'true',
  reason='5 JAX processes (~1.5 min of a worker): run locally; the 2-process iterate tests '
  'above run in CI (.ci/run stays under 15 minutes)',
)
def test_train_script_two_processes_write_one_set_of_outputs(tmp_path):
  """2 processes (one stopping after 4 steps, then a resume), same outputs as 1 process."""
  from afl_jax.pipeline import metrics_io

  logs = str(tmp_path / 'logs')
  os.makedirs(logs)
  two, one = str(tmp_path / 'two'), str(tmp_path / 'one')
  _train_pair(two, logs, '--config.stop_after_steps=4')
  first = metrics_io.read_metrics(two)
  assert [r['step'] for r in first] == [0, 4]
  text = _train_pair(two, logs)  # resumes from the checkpoint at step 4
  assert 'resumed from checkpoint at server step 4' in text[0]
  assert 'step 8/8' in text[0] and 'step 8/8' not in text[1]  # only process 0 logs
  reference = subprocess.run(
    [sys.executable, TRAIN, *TRAIN_ARGS, f'--workdir={one}'],
    env=_train_env(),
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
  )
  assert reference.returncode == 0, reference.stderr[-3000:]
  got, want = metrics_io.read_metrics(two), metrics_io.read_metrics(one)
  assert [r['step'] for r in got] == [0, 4, 8]  # each record once: one writer
  for a, b in zip(got, want, strict=True):
    assert a.keys() == b.keys()
    for k in a:  # float32 round-off of the cross-process sum over arrivals
      np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)
  outs = _outputs(two)
  assert outs.get(os.path.join('tensorboard', 'events.out.tfevents.*')) == 2  # 2 invocations
  for name in ('metrics.jsonl', 'summary.json', 'config.json', 'plot.png', 'schedule.npz'):
    assert outs.get(name) == 1, (name, outs)
  assert os.path.isdir(os.path.join(two, 'checkpoints', '4'))  # none at the end: it finished
  assert not [k for k in outs if k.endswith('.tmp')], outs
  with open(os.path.join(two, 'summary.json')) as f:
    summary = json.load(f)
  assert summary['devices'] == 2 and summary['steps'] == 8
