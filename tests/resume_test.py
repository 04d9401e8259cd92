"""A rerun is the uninterrupted run: single runs and sweeps, stopped, killed or cut.

Every case ends bit for bit where one uninterrupted run of the config ends (the same
program replays the same inputs): stop_after_steps between checkpoints, a kill (SIGINT,
SIGKILL) through scripts/train.py, metrics.jsonl cut back so that an earlier checkpoint is
resumed and the later ones are saved again. A finished run is not run again; --noresume
starts over; a damaged checkpoint or a gap in the records is one line naming the file.
Kept small: digits + logistic regression, a few steps.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helper_runs import ROOT, default_signals, one_error_line, run_train

from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import loop, sweep

CONFIG = """
from afl_jax.pipeline import config as config_lib

def get_config(kind='single'):
  c = config_lib.default()
  c.dataset, c.model, c.num_clients = 'digits', 'logreg', 8
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.local_steps, c.batch_size = 2, 8
  config_lib.set_algorithm(c, 'fedbuff', client_lr=0.1, server_lr=1.0)
  c.num_rounds, c.eval_every, c.eval_train_samples, c.checkpoint_every = {rounds}, 2, 50, 2
  if kind == 'sweep':
    c.sweep = {{'local_steps': [1, 2], 'hparams': {{'client_lr': [0.05, 0.1]}}}}
  return c
"""


def config(kind='single', rounds=8):
  c = config_lib.default()
  c.dataset, c.model, c.num_clients = 'digits', 'logreg', 8
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.local_steps, c.batch_size = 2, 8
  config_lib.set_algorithm(c, 'fedbuff', client_lr=0.1, server_lr=1.0)
  c.num_rounds, c.eval_every, c.eval_train_samples, c.checkpoint_every = rounds, 2, 50, 2
  if kind == 'sweep':
    c.sweep = {'local_steps': [1, 2], 'hparams': {'client_lr': [0.05, 0.1]}}
  return c


def train(c, work, **kw):
  if c.get('sweep'):
    return sweep.train_sweep(c, str(work), log=lambda *_: None, **kw)
  return loop.train_and_evaluate(c, str(work), log=lambda *_: None, **kw)


def metrics(work):
  """Every run's metrics.jsonl of a workdir (a single run's, or each of a sweep's), as bytes."""
  paths = glob.glob(os.path.join(work, 'metrics.jsonl')) + glob.glob(f'{work}/*/metrics.jsonl')
  return {os.path.relpath(p, work): open(p, 'rb').read() for p in sorted(paths)}


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """The uninterrupted single run and sweep: kind -> workdir."""
  out = {}
  for kind in ('single', 'sweep'):
    out[kind] = tmp_path_factory.mktemp(kind) / 'whole'
    train(config(kind), out[kind])
  return out


@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_a_stop_between_checkpoints_then_rerun_equals_the_whole_run(reference, tmp_path, kind):
  c = config(kind)
  c.stop_after_steps = 3  # ends at step 4, saved there (checkpoint_every=2)
  out = train(c, tmp_path)
  statuses = [r['status'] for r in out['runs']] if kind == 'sweep' else [out['status']]
  assert set(statuses) == {'stopped at step 4'}
  again = train(config(kind), tmp_path)
  assert metrics(tmp_path) == metrics(reference[kind])
  assert again['complete'] if kind == 'sweep' else again['status'] == 'completed'
  # Finished: run again, nothing is computed and the records stay as they are.
  before = {
    p: os.stat(p).st_mtime_ns for p in glob.glob(f'{tmp_path}/**/metrics.jsonl', recursive=True)
  }
  train(config(kind), tmp_path)
  assert {p: os.stat(p).st_mtime_ns for p in before} == before


@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_cut_records_resume_an_earlier_checkpoint_and_save_the_later_ones_again(
  reference, tmp_path, kind
):
  c = config(kind)
  c.stop_after_steps = 6  # checkpoints at 2, 4 and 6
  train(c, tmp_path)
  for path in glob.glob(f'{tmp_path}/**/metrics.jsonl', recursive=True):
    with open(path) as f:
      lines = f.readlines()
    with open(path, 'w') as f:
      f.writelines(lines[:2])  # steps 0 and 2: the checkpoint at 2 is the one to resume
  train(config(kind), tmp_path)
  assert metrics(tmp_path) == metrics(reference[kind])


@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_noresume_starts_over_and_a_gap_or_a_damaged_checkpoint_is_one_line(tmp_path, kind):
  file = tmp_path / 'cfg.py'
  file.write_text(CONFIG.format(rounds=8))
  spec = f'--config={file}:{kind}'
  rc, out = run_train(tmp_path / 'w', spec, '--config.stop_after_steps=4')
  assert rc == 0, out
  records = sorted(glob.glob(f'{tmp_path}/w/**/metrics.jsonl', recursive=True))
  steps = sorted(glob.glob(f'{tmp_path}/w/**/checkpoints/4', recursive=True))
  assert records and steps
  with open(records[0], 'w') as f:
    f.write('{"step": 0}\n')  # every checkpoint follows records that are gone
  one_error_line(*run_train(tmp_path / 'w', spec), 'metrics.jsonl lacks evaluation records')
  rc, out = run_train(tmp_path / 'w', spec, '--noresume', '--config.stop_after_steps=4')
  assert rc == 0, out
  for item in glob.glob(f'{steps[0]}/**/*', recursive=True):  # a damaged checkpoint
    if os.path.isfile(item) and os.path.getsize(item) > 100:
      with open(item, 'wb') as f:
        f.write(b'\0' * 10)
  one_error_line(*run_train(tmp_path / 'w', spec), 'cannot restore the checkpoint', '/4')


def _wait_for(pattern, proc, timeout=300):
  """Until a finished checkpoint (orbax renames a step's folder to its number) matches."""
  t0 = time.monotonic()
  while not [p for p in glob.glob(pattern, recursive=True) if os.path.basename(p).isdigit()]:
    assert proc.poll() is None, proc.communicate()
    assert time.monotonic() - t0 < timeout
    time.sleep(0.05)


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
  """``kind -> (--config spec, metrics of the whole 60-step run)``, each run once."""
  done = {}

  def get(kind):
    if kind not in done:
      where = tmp_path_factory.mktemp(f'whole_{kind}')
      (where / 'cfg.py').write_text(CONFIG.format(rounds=60))
      spec = f'--config={where / "cfg.py"}:{kind}'
      rc, out = run_train(where / 'whole', spec)
      assert rc == 0, out
      done[kind] = spec, metrics(where / 'whole')
    return done[kind]

  return get


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGKILL])
@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_a_killed_run_resumes_to_the_uninterrupted_run(tmp_path, uninterrupted, kind, sig):
  spec, whole = uninterrupted(kind)
  work = tmp_path / 'cut'
  proc = subprocess.Popen(
    [sys.executable, 'scripts/train.py', spec, f'--workdir={work}'],
    cwd=ROOT,
    env={**os.environ, 'JAX_PLATFORMS': 'cpu'},
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=default_signals,
  )
  _wait_for(f'{work}/**/checkpoints/*', proc)
  proc.send_signal(sig)
  _, stderr = proc.communicate(timeout=120)
  if sig == signal.SIGINT:
    assert proc.returncode == 130 and 'Traceback' not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith('interrupted (Ctrl-C)'), stderr
  else:
    assert proc.returncode == -sig
  rc, out = run_train(work, spec)
  assert rc == 0, out
  assert 'resumed from' in out, out
  assert metrics(work) == whole
  shutil.rmtree(work)


def test_a_sweep_run_equals_the_same_config_run_alone(reference, tmp_path):
  c = config('sweep')
  for p in sweep.grid(c):
    alone = tmp_path / sweep.run_name(p)
    train(sweep.point_config(c, p), alone)
    ident = lambda d: json.loads((d / 'config.json').read_text())['identity']['digest']
    assert ident(alone) == ident(reference['sweep'] / sweep.run_name(p))
    got = [json.loads(line) for line in metrics(alone)['metrics.jsonl'].splitlines()]
    want = metrics(reference['sweep'])[f'{sweep.run_name(p)}/metrics.jsonl'].splitlines()
    for a, b in zip(got, map(json.loads, want), strict=True):  # float32: another program
      assert a['step'] == b['step'] and a['bytes_up'] == b['bytes_up']
      assert a['test_loss'] == pytest.approx(b['test_loss'], rel=1e-5)
