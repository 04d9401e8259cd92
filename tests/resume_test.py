"""A rerun of a single run or a sweep, stopped, killed or cut, ends bit for bit as the
uninterrupted run; a damaged checkpoint or a gap in the records is one line naming the file."""

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helper_runs import ROOT, default_signals, run_train

from afl_jax.errors import UserError
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import loop, sweep

CONFIG = """
from afl_jax.pipeline import config as config_lib

def get_config(arg='single,8'):
  kind, rounds = arg.split(',')
  c = config_lib.default()
  c.dataset, c.model, c.num_clients = 'digits', 'logreg', 8
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.local_steps, c.batch_size = 2, 8
  config_lib.set_algorithm(c, 'fedbuff', client_lr=0.1, server_lr=1.0)
  c.num_rounds, c.eval_every, c.eval_train_samples, c.checkpoint_every = int(rounds), 2, 50, 2
  if kind == 'sweep':
    c.sweep = {'local_steps': [1, 2], 'hparams': {'client_lr': [0.05, 0.1]}}
  return c
"""


@pytest.fixture(scope='module')
def cfg(tmp_path_factory):
  path = tmp_path_factory.mktemp('cfg') / 'cfg.py'
  path.write_text(CONFIG)
  return lambda kind, rounds=8: f'{path}:{kind},{rounds}'


def train(spec, work, resume=True, **fields):
  c = config_lib.load_file(spec)
  c.update(fields)
  run = sweep.train_sweep if c.get('sweep') else loop.train_and_evaluate
  return run(c, str(work), log=lambda *_: None, resume=resume)


def metrics(work):
  paths = glob.glob(os.path.join(work, 'metrics.jsonl')) + glob.glob(f'{work}/*/metrics.jsonl')
  return {os.path.relpath(p, work): open(p, 'rb').read() for p in sorted(paths)}


@pytest.fixture(scope='module')
def whole(cfg, tmp_path_factory):
  done = {}

  def get(kind, rounds=8):
    if (kind, rounds) not in done:
      work = tmp_path_factory.mktemp(f'whole_{kind}_{rounds}')
      train(cfg(kind, rounds), work)
      done[kind, rounds] = metrics(work)
    return done[kind, rounds]

  return get


@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_a_stop_between_checkpoints_then_rerun_equals_the_whole_run(cfg, whole, tmp_path, kind):
  # Ends at step 4, saved there (checkpoint_every=2).
  status = lambda out: {r['status'] for r in out.get('runs', [out])}  # noqa: E731
  assert status(train(cfg(kind), tmp_path, stop_after_steps=3)) == {'stopped at step 4'}
  assert status(train(cfg(kind), tmp_path)) == {'completed'}
  assert metrics(tmp_path) == whole(kind)
  # Finished: run again, nothing is computed and the records stay as they are.
  paths = glob.glob(f'{tmp_path}/**/metrics.jsonl', recursive=True)
  before = {p: os.stat(p).st_mtime_ns for p in paths}
  train(cfg(kind), tmp_path)
  assert {p: os.stat(p).st_mtime_ns for p in before} == before


def _cut(work, keep):
  paths = sorted(glob.glob(f'{work}/**/metrics.jsonl', recursive=True))
  for path in paths:
    with open(path) as f:
      lines = f.readlines()
    with open(path, 'w') as f:
      f.writelines(lines[:keep])
  return paths


@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_cut_records_resume_an_earlier_checkpoint_and_save_the_later_ones_again(
  cfg, whole, tmp_path, kind
):
  train(cfg(kind), tmp_path, stop_after_steps=6)  # checkpoints at 2, 4 and 6
  _cut(tmp_path, 2)  # steps 0 and 2: the checkpoint at 2 is the one to resume
  train(cfg(kind), tmp_path)
  assert metrics(tmp_path) == whole(kind)


@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_noresume_starts_over_and_a_gap_is_one_line(cfg, whole, tmp_path, kind):
  train(cfg(kind), tmp_path, stop_after_steps=4)
  assert _cut(tmp_path, 1)  # every checkpoint follows records that are gone
  with pytest.raises(UserError, match='metrics.jsonl lacks evaluation records') as e:
    train(cfg(kind), tmp_path)
  assert '\n' not in str(e.value)
  train(cfg(kind), tmp_path, resume=False)
  assert metrics(tmp_path) == whole(kind)


def _data_file(step_dir):
  files = [p for p in glob.glob(f'{step_dir}/**/*', recursive=True) if os.path.isfile(p)]
  return max(files, key=os.path.getsize)


def _flip(step_dir):
  path = _data_file(step_dir)
  data = bytearray(open(path, 'rb').read())
  data[len(data) // 2] ^= 1
  open(path, 'wb').write(bytes(data))


DAMAGES = {
  'a flipped byte': (_flip, 'changed since it was saved'),
  'a cut file': (lambda d: os.truncate(_data_file(d), 10), 'changed since it was saved'),
  'a renamed folder': (lambda d: os.rename(d, d[:-1] + '3'), 'holds server step 4, not 3'),
  'no manifest': (lambda d: os.remove(f'{d}/afl_jax.json'), 'no readable afl_jax.json'),
}


@pytest.mark.parametrize('damage', list(DAMAGES))
def test_a_damaged_checkpoint_is_skipped_with_one_warning_and_the_run_equals_the_whole(
  cfg, whole, tmp_path, capsys, damage
):
  train(cfg('single'), tmp_path, stop_after_steps=4)  # checkpoints at 2 and 4
  harm, why = DAMAGES[damage]
  harm(str(tmp_path / 'checkpoints' / '4'))
  capsys.readouterr()
  train(cfg('single'), tmp_path)
  warnings = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
  assert len(warnings) == 1 and warnings[0].startswith('warning: skipped the checkpoint'), warnings
  assert why in warnings[0] and 'continuing from the one of server step 2' in warnings[0]
  assert metrics(tmp_path) == whole('single')
  if damage == 'no manifest':  # the only checkpoint's save cut before it: as no checkpoint
    train(cfg('single'), tmp_path / 'cut', stop_after_steps=1)  # one checkpoint, at 2
    os.remove(tmp_path / 'cut' / 'checkpoints' / '2' / 'afl_jax.json')
    train(cfg('single'), tmp_path / 'cut')
    assert 'starting over' in capsys.readouterr().err
    assert metrics(tmp_path / 'cut') == whole('single')


def test_a_sweeps_damaged_checkpoint_is_skipped_and_checkpoints_of_another_run_refused(
  cfg, whole, tmp_path, capsys
):
  train(cfg('sweep'), tmp_path / 'sweep', stop_after_steps=4)
  for latest in glob.glob(f'{tmp_path}/sweep/groups/*/checkpoints/4'):  # each group's
    _flip(latest)
  train(cfg('sweep'), tmp_path / 'sweep')
  assert 'warning: skipped the checkpoint' in capsys.readouterr().err
  assert metrics(tmp_path / 'sweep') == whole('sweep')
  train(cfg('single'), tmp_path / 'mine', stop_after_steps=4)
  other = config_lib.load_file(cfg('single'))
  other.stop_after_steps, other.hparams.client_lr = 4, 0.2
  loop.train_and_evaluate(other, str(tmp_path / 'other'), log=lambda *_: None)
  shutil.rmtree(tmp_path / 'mine' / 'checkpoints')
  shutil.copytree(tmp_path / 'other' / 'checkpoints', tmp_path / 'mine' / 'checkpoints')
  with pytest.raises(UserError) as e:
    train(cfg('single'), tmp_path / 'mine')
  text = str(e.value)
  assert 'checkpoints/4 (and 1 earlier) fails its check: it was saved by another run' in text
  assert '--noresume' in text and '\n' not in text


@pytest.mark.parametrize('kind,sig', [('single', signal.SIGINT), ('sweep', signal.SIGKILL)])
def test_a_killed_run_resumes_to_the_uninterrupted_run(cfg, whole, tmp_path, kind, sig):
  work = tmp_path / 'cut'
  proc = subprocess.Popen(
    [sys.executable, 'scripts/train.py', f'--config={cfg(kind, 60)}', f'--workdir={work}'],
    cwd=ROOT,
    env={**os.environ, 'JAX_PLATFORMS': 'cpu'},
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=default_signals,
  )
  t0 = time.monotonic()
  while not glob.glob(f'{work}/**/checkpoints/*/afl_jax.json', recursive=True):
    assert proc.poll() is None, proc.communicate()
    assert time.monotonic() - t0 < 300
    time.sleep(0.05)
  proc.send_signal(sig)
  _, stderr = proc.communicate(timeout=120)
  if sig == signal.SIGINT:
    assert proc.returncode == 130 and 'Traceback' not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith('interrupted (Ctrl-C)'), stderr
  else:
    assert proc.returncode == -sig
  rc, out = run_train(work, f'--config={cfg(kind, 60)}')
  assert rc == 0 and 'resumed from' in out, out
  assert metrics(work) == whole(kind, 60)  # the script's run and the in-process one
