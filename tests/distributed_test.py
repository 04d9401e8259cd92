"""Two processes, one run (JAX's distributed runtime, gloo on localhost): the iterates, orbax
checkpoints and sweeps of one process; then scripts/train.py as 2 processes."""

import json
import os
import pathlib
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
  """``command(process_id, port)`` for processes 0 and 1 until both end; fails the test when one
  fails or TIMEOUT_S passes (skips it without gloo). Returns the processes' outputs."""
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
  command = [sys.executable, HELPER, f'--out={out_dir}', '--timeout=120']
  command += [f'--cases={",".join(distributed_run.ALL_CASES)}']
  command += [f'--checkpoint_dir={os.path.join(out_dir, "ckpt")}']
  _pair(command, out_dir, '2-process run', env)
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
  # afl_jax.pipeline.processes: process 0's result on both; a refusal on one, raised on both.
  for i, arrays in enumerate(procs):
    assert int(arrays['told']) == 7 and bool(arrays['told_none'])
    for name, on in (('on_writer', 0), ('agreed', 1)):
      line = f'config.x=1 is invalid: seen on process {on} only'
      where = f' (process {on}, a check{" on 0" if name == "on_writer" else ""})'
      assert str(arrays[f'said_{name}']) == line + ('' if i == on else where), (i, name)


# ---- scripts/train.py in 2 processes: one set of outputs (process 0 writes) ----------------
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'scripts', 'train.py')
SMOKE = os.path.join(ROOT, 'configs', 'digits_smoke.py')
TRAIN_ARGS = [
  f'--config={SMOKE}',
  '--config.num_rounds=8',
  '--config.eval_every=4',
  '--config.checkpoint_every=4',
  '--config.eval_train_samples=100',
]


def _train_env(devices: str = '1') -> dict:
  env = dict(os.environ, AFL_JAX_CPU_DEVICES=devices, JAX_PLATFORMS='cpu')
  env.pop('XLA_FLAGS', None)
  return env


def _one(command: list[str], devices: str = '1') -> subprocess.CompletedProcess:
  """``command`` as one process of ``devices`` CPU devices."""
  run = subprocess.run
  return run(command, env=_train_env(devices), cwd=ROOT, capture_output=True, text=True,
             timeout=TIMEOUT_S)  # fmt: skip


def _pair(command: list[str], logs: str, what: str, env: dict | None = None) -> list[str]:
  """``command`` as 2 processes (one workdir); fails the test if either fails."""
  n = len(os.listdir(logs))
  return _two_processes(
    lambda pid, port: [*command, '--num_processes=2', f'--process_id={pid}',
                       f'--coordinator=127.0.0.1:{port}'],
    [os.path.join(logs, f'{what.split()[-1]}_{n + pid}_{pid}.log') for pid in range(2)],
    env or _train_env(), cwd=ROOT, what=what,
  )  # fmt: skip


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
  command = [sys.executable, TRAIN, *TRAIN_ARGS, f'--workdir={two}']
  _pair([*command, '--config.stop_after_steps=4'], logs, '2-process train')
  assert [r['step'] for r in metrics_io.read_metrics(two)] == [0, 4]
  text = _pair(command, logs, '2-process train')  # resumes from the checkpoint at step 4
  assert 'resumed from checkpoint at server step 4' in text[0]
  assert 'step 8/8' in text[0] and 'step 8/8' not in text[1]  # only process 0 logs
  reference = _one([sys.executable, TRAIN, *TRAIN_ARGS, f'--workdir={one}'])
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


# ---- a sweep in 2 processes: the replica axis over both, one writer, equal to 1 process ----
SWEEP = "{'hparams': {'client_lr': [0.05, 0.1]}, 'seed': [0, 1]}"  # 4 runs, one group


def _sweep_config(tmp_path) -> str:
  """digits_smoke with a 4-run grid (a config file: the command line sets no new field)."""
  path = tmp_path / 'sweep_config.py'
  path.write_text(
    'from afl_jax.pipeline import config\n\n\ndef get_config():\n'
    f'  c = config.load_file({SMOKE!r})\n  c.sweep = {SWEEP}\n  return c\n'
  )
  return str(path)


def _sweep_command(config: str, workdir: str) -> list[str]:
  """train.py with TRAIN_ARGS' settings and the grid."""
  return [sys.executable, TRAIN, f'--config={config}', *TRAIN_ARGS[1:], f'--workdir={workdir}']


def _sweep_pair(config: str, workdir: str, logs: str, *extra: str) -> list[str]:
  return _pair([*_sweep_command(config, workdir), *extra], logs, '2-process sweep')


def _one_process_sweep(config: str, workdir: str, *extra: str) -> None:
  """The same sweep in one process of 2 CPU devices: the same devices, identity and program."""
  done = _one([*_sweep_command(config, workdir), *extra], devices='2')
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


FILES = ('metrics.jsonl', 'config.json')


def _run_files(workdir: str) -> dict[str, bytes]:
  """Each run folder's metrics and config (the identity, the program): their bytes."""
  paths = [pathlib.Path(workdir, n, f) for n in sorted(os.listdir(workdir)) for f in FILES]
  return {f'{p.parent.name}/{p.name}': p.read_bytes() for p in paths if p.is_file()}


def test_sweep_in_two_processes_equals_one_process_bit_for_bit(tmp_path):
  """train.py --config.sweep in 2 processes of 1 device: the 4 replicas laid out over both
  processes' devices; process 0 alone writes every run folder; the records equal, byte for
  byte, those of 1 process of 2 devices (the same program: each replica's arithmetic stays
  on its device, no cross-process reduction enters a replica's numbers)."""
  config, logs = _sweep_config(tmp_path), str(tmp_path / 'logs')
  os.makedirs(logs)
  two, one = str(tmp_path / 'two'), str(tmp_path / 'one')
  text = _sweep_pair(config, two, logs)
  assert '2 processes, 2 devices' in text[0] and 'sweep: 4 runs, 4 completed' in text[0]
  assert 'sweep:' not in text[1]  # only process 0 logs
  _one_process_sweep(config, one)
  got, want = _run_files(two), _run_files(one)
  assert len(want) == 8 and got == want  # 4 runs x (metrics.jsonl, config.json)
  outs = _outputs(two)
  for name in ('summary.json', 'summary.md', 'plot.png'):
    assert outs.get(name) == 1, (name, outs)
  assert not [k for k in outs if k.endswith('.tmp') or k.startswith('groups')], outs
  with open(os.path.join(two, 'summary.json')) as f:
    summary = json.load(f)
  assert summary['complete'] and len(summary['runs']) == 4


@pytest.mark.skipif(
  os.environ.get('CI') == 'true',
  reason='7 JAX processes (~2 min of a worker): run locally; the 2-process sweep above runs in CI',
)
def test_sweep_in_two_processes_stopped_then_rerun(tmp_path):
  """Stopped after its checkpoint at step 4 in 2 processes, the same command resumes every
  run there and ends equal to 1 uninterrupted process; a third reuses every run; 1 process
  of 1 device (another identity: engine.devices) is refused in one line."""
  config, logs = _sweep_config(tmp_path), str(tmp_path / 'logs')
  os.makedirs(logs)
  two, one = str(tmp_path / 'two'), str(tmp_path / 'one')
  text = _sweep_pair(config, two, logs, '--config.stop_after_steps=4')
  assert '4 stopped' in text[0], text[0][-2000:]
  text = _sweep_pair(config, two, logs)
  assert 'group 0: resumed from its checkpoint at server step 4' in text[0], text[0][-2000:]
  _one_process_sweep(config, one)
  assert _run_files(two) == _run_files(one)
  text = _sweep_pair(config, two, logs)
  assert '4 runs (4 finished earlier, reused) in 0 group(s)' in text[0], text[0][-2000:]
  assert _run_files(two) == _run_files(one)
  refused = _one(_sweep_command(config, two))  # 1 device: engine.devices 2 -> 1, another identity
  assert refused.returncode == 1
  last = refused.stderr.strip().splitlines()[-1]
  assert last.startswith('error: ') and 'holds a run of other inputs' in last, last
  assert 'devices' in last, last


@pytest.mark.skipif(
  os.environ.get('CI') == 'true',
  reason='5 JAX processes (~2 min of a worker): run locally; the 2-process sweep above runs in CI',
)
def test_sweep_in_two_processes_killed_then_rerun(tmp_path):
  """SIGKILL process 1 once a checkpoint is whole (process 0 then stalls at the next
  collective: killed too, as a scheduler would), then the same command: every run resumes
  from the last whole checkpoint and ends equal to 1 uninterrupted process."""
  import glob

  config, logs = _sweep_config(tmp_path), str(tmp_path / 'logs')
  os.makedirs(logs)
  two, one = str(tmp_path / 'two'), str(tmp_path / 'one')
  longer = '--config.num_rounds=40'  # ~2 s of steps after the compile: time to kill
  port, procs = _free_port(), []
  for pid in range(2):
    with open(os.path.join(logs, f'killed_{pid}.log'), 'w') as log:
      command = [*_sweep_command(config, two), longer, '--num_processes=2']
      command += [f'--process_id={pid}', f'--coordinator=127.0.0.1:{port}']
      procs.append(
        subprocess.Popen(command, env=_train_env(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
      )
  manifests = os.path.join(two, 'groups', '*', 'checkpoints', '*', 'afl_jax.json')
  deadline = time.monotonic() + TIMEOUT_S
  try:
    while not glob.glob(manifests) and time.monotonic() < deadline:
      assert all(p.poll() is None for p in procs), 'a process ended before its first checkpoint'
      time.sleep(0.02)
  finally:
    procs[1].kill()
    procs[1].wait()
    time.sleep(0.5)
    procs[0].kill()
    procs[0].wait()
  assert glob.glob(manifests), 'no checkpoint within the time limit'
  text = _sweep_pair(config, two, logs, longer)
  assert 'group 0: resumed from its checkpoint at server step' in text[0], text[0][-2000:]
  _one_process_sweep(config, one, longer)
  got, want = _run_files(two), _run_files(one)
  assert len(want) == 8 and got == want
