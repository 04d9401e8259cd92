"""Sweeps that say what happened and resume like runs (issue 31).

* a replica that diverges is recorded as ``stopped: diverged at step S (QUANTITY)`` with
  null accuracies and losses, summary.json is strict JSON, and scripts/train.py exits 1
  with a last line counting the diverged runs;
* an interrupted sweep (Ctrl-C in the Python API, SIGINT and kill -9 of scripts/train.py)
  continues from its checkpoints: a finished group is not run again, the others resume
  at their last checkpoint, and every run's metrics.jsonl equals the uninterrupted
  sweep's byte for byte; Ctrl-C is one line with exit status 130;
* a finished run whose records were damaged by hand is run again, with no gap;
* extending a sweep to more rounds is refused in one line naming num_rounds.

Kept small: digits + logistic regression, 2 groups of 2 replicas, a few steps.
"""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import ml_collections
import pytest
from helper_runs import default_signals

from afl_jax.pipeline import checkpoint, sweep
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import workdir as workdir_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, 'JAX_PLATFORMS': 'cpu', 'PYTHONPATH': ROOT}


def _grid(lrs=(0.05, 0.1), **changes):
  """2 x 2 runs in 2 groups (local_steps is not traced: one compile per value)."""
  c = config_lib.default()
  c.dataset, c.model, c.num_clients = 'digits', 'logreg', 8
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.local_steps, c.batch_size = 2, 8
  c.hparams = {'client_lr': 0.1, 'server_lr': 1.0}
  c.num_rounds, c.eval_every, c.eval_train_samples, c.checkpoint_every = 6, 2, 50, 2
  for k, v in changes.items():
    c[k] = v
  c.sweep = ml_collections.ConfigDict({'local_steps': [1, 2], 'hparams': {'client_lr': list(lrs)}})
  return c


def _names(local_steps, c=None):
  """The run names of the group with ``local_steps`` (named as the sweep names them)."""
  points = sweep.grid(c or _grid())
  return [sweep.run_name(p) for p in points if p['local_steps'] == local_steps]


def _metrics(work):
  """Every run's metrics.jsonl, as bytes."""
  out = {}
  for name in sorted(os.listdir(work)):
    path = os.path.join(work, name, 'metrics.jsonl')
    if os.path.isfile(path):
      with open(path, 'rb') as f:
        out[name] = f.read()
  return out


def _strict(path):
  """A JSON file parsed with NaN / Infinity refused."""

  def bad(word):
    raise AssertionError(f'{path} holds {word}: not strict JSON')

  with open(path) as f:
    return json.load(f, parse_constant=bad)


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """The uninterrupted sweep."""
  work = str(tmp_path_factory.mktemp('reference') / 'sweep')
  out = sweep.train_sweep(_grid(), work, log=lambda *_: None)
  return work, out


def test_interrupted_sweep_continues_from_its_checkpoints_bitwise(reference, tmp_path, monkeypatch):
  ref, ref_out = reference
  work = str(tmp_path / 'sweep')
  real_save = checkpoint.Checkpointer.save
  saved = []

  def save_then_ctrl_c(self, step, *args):
    real_save(self, step, *args)
    saved.append((os.path.basename(os.path.dirname(self.directory)), step))
    if saved[-1] == ('1', 4):
      raise KeyboardInterrupt  # Ctrl-C in the second group, after its checkpoint at step 4

  monkeypatch.setattr(checkpoint.Checkpointer, 'save', save_then_ctrl_c)
  with pytest.raises(workdir_lib.Interrupted) as e:
    sweep.train_sweep(_grid(), work, log=lambda *_: None)
  monkeypatch.setattr(checkpoint.Checkpointer, 'save', real_save)
  assert saved == [('0', 2), ('0', 4), ('1', 2), ('1', 4)]  # no save at the last step
  line = str(e.value)
  assert '\n' not in line and '2 of 4 runs' in line and 'checkpoint_every=2' in line, line
  record = _strict(os.path.join(work, workdir_lib.SWEEP_FILE))
  assert record['complete'] is False and record['status'].startswith('interrupted'), record
  assert not os.path.exists(os.path.join(work, 'summary.json'))
  first = _metrics(work)
  assert len(first) == 4  # the second group's records up to step 4 are kept
  assert not os.path.exists(os.path.join(work, workdir_lib.LOCK_FILE))

  logs = []
  out = sweep.train_sweep(_grid(), work, log=logs.append)
  assert 'group 0: its 2 runs finished earlier; not run again' in logs, logs
  assert 'group 1: resumed from its checkpoint at server step 4' in logs, logs
  done = {n: first[n] for n in _names(1)}
  assert len(done) == 2
  assert {n: _metrics(work)[n] for n in done} == done  # untouched, not recomputed
  assert _metrics(work) == _metrics(ref)  # bitwise the uninterrupted sweep's records
  assert out['runs'] == ref_out['runs']
  assert _strict(os.path.join(work, 'summary.json'))['runs'] == ref_out['runs']
  assert [r['status'] for r in out['runs']] == ['completed'] * 4
  assert sweep.finished(work, _grid())
  assert not any(os.path.exists(os.path.join(work, 'groups', k, 'checkpoints')) for k in '01')

  # Run again: nothing is computed, the files stay the same.
  logs.clear()
  again = sweep.train_sweep(_grid(), work, log=logs.append)
  assert again == out and sum('not run again' in line for line in logs) == 2, logs

  # A finished run whose records lost their tail (by hand): its group runs again, no gap.
  path = os.path.join(work, _names(2)[1], 'metrics.jsonl')
  with open(path, 'rb') as f:
    lines = f.read().splitlines(keepends=True)
  with open(path, 'wb') as f:
    f.writelines(lines[:2])
  logs.clear()
  assert sweep.train_sweep(_grid(), work, log=logs.append)['runs'] == out['runs']
  assert 'group 0: its 2 runs finished earlier; not run again' in logs, logs
  assert _metrics(work) == _metrics(ref)


def test_a_gap_before_the_checkpoint_runs_the_group_again(reference, tmp_path, monkeypatch):
  ref, _ = reference
  work = str(tmp_path / 'sweep')
  real_save = checkpoint.Checkpointer.save

  def save_then_ctrl_c(self, step, *args):
    real_save(self, step, *args)
    if step == 4:
      raise KeyboardInterrupt

  monkeypatch.setattr(checkpoint.Checkpointer, 'save', save_then_ctrl_c)
  with pytest.raises(KeyboardInterrupt):
    sweep.train_sweep(_grid(), work, log=lambda *_: None)
  monkeypatch.setattr(checkpoint.Checkpointer, 'save', real_save)
  path = os.path.join(work, _names(1)[1], 'metrics.jsonl')
  with open(path) as f:
    lines = f.readlines()
  with open(path, 'w') as f:  # the record of step 2 deleted by hand: a gap before step 4
    f.writelines(lines[:1] + lines[2:])
  logs = []
  sweep.train_sweep(_grid(), work, log=logs.append)
  assert not any('resumed' in line for line in logs), logs
  assert _metrics(work) == _metrics(ref)


def test_extending_a_sweep_is_refused_naming_num_rounds(reference):
  ref, ref_out = reference
  kept = _metrics(ref), open(os.path.join(ref, 'summary.json'), 'rb').read()
  # How often checkpoints are kept may change: nothing is run again.
  logs = []
  out = sweep.train_sweep(_grid(checkpoint_every=4), ref, log=logs.append)
  assert out['runs'] == ref_out['runs'] and sum('not run again' in x for x in logs) == 2, logs
  assert (_metrics(ref), open(os.path.join(ref, 'summary.json'), 'rb').read()) == kept
  with pytest.raises(workdir_lib.WorkdirError) as e:
    sweep.train_sweep(_grid(num_rounds=8), ref, log=lambda *_: None)
  text = str(e.value)
  assert '\n' not in text and 'num_rounds 6 -> 8' in text and 'cannot be extended' in text, text
  assert (_metrics(ref), open(os.path.join(ref, 'summary.json'), 'rb').read()) == kept


def _copy(ref, tmp_path):
  work = str(tmp_path / 'copy')
  shutil.copytree(ref, work)
  return work


@pytest.mark.parametrize(
  'key, value, fragment',
  [
    ('data_sha256', '0' * 64, 'the data differs from the files it trained on (config.data_dir'),
    ('devices', 64, 'it ran on 64 device(s), this process has 1 ($AFL_JAX_CPU_DEVICES'),
    ('platform', 'tpu', 'it ran on tpu, this process on cpu ($JAX_PLATFORMS)'),
  ],
)
def test_a_sweep_is_not_continued_on_other_data_or_devices(
  reference, tmp_path, key, value, fragment
):
  ref, _ = reference
  work = _copy(ref, tmp_path)
  path = os.path.join(work, workdir_lib.SWEEP_FILE)
  record = _strict(path)
  assert set(record['identity']) == {'data_sha256', 'devices', 'platform'}
  record['identity'][key] = value  # as if it had run on other data, devices or platform
  with open(path, 'w') as f:
    json.dump(record, f)
  kept = _metrics(work), open(os.path.join(work, 'summary.json'), 'rb').read()
  with pytest.raises(workdir_lib.WorkdirError) as e:
    sweep.train_sweep(_grid(), work, log=lambda *_: None)
  text = str(e.value)
  assert '\n' not in text and fragment in text and workdir_lib.SWEEP_FILE in text, text
  assert (_metrics(work), open(os.path.join(work, 'summary.json'), 'rb').read()) == kept


def test_damaged_sweep_files_are_refused_in_one_line_before_compute(reference, tmp_path):
  ref, _ = reference
  work = _copy(ref, tmp_path)
  path = os.path.join(work, workdir_lib.SWEEP_FILE)
  kept = open(path).read()
  with open(path, 'w') as f:
    f.write('[1, 2]')
  with pytest.raises(workdir_lib.WorkdirError, match='sweep.json is not a JSON object'):
    sweep.train_sweep(_grid(), work, log=lambda *_: None)
  with open(path, 'w') as f:
    f.write(kept)
  run = os.path.join(work, _names(2)[0])
  shutil.move(run, run + '.kept')
  with open(run, 'w') as f:  # a run's directory replaced by a file
    f.write('x')
  with pytest.raises(workdir_lib.WorkdirError) as e:
    sweep.train_sweep(_grid(), work, log=lambda *_: None)
  assert f'{_names(2)[0]} is a file, not a directory' in str(e.value), str(e.value)
  assert open(run).read() == 'x' and _strict(path)['complete'] is True


def test_ctrl_c_during_a_checkpoint_waits_for_it():
  done = []
  with pytest.raises(KeyboardInterrupt):
    with workdir_lib.ctrl_c_after():
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.1)  # the handler ran meanwhile: nothing raised inside the block
      done.append('saved')
  assert done == ['saved']
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_diverged_single_run_writes_strict_json(tmp_path):
  from afl_jax.pipeline import loop

  c = _grid()
  c.hparams.client_lr, c.sweep = 1e30, ml_collections.ConfigDict()
  with pytest.raises(loop.NonFiniteError):
    loop.train_and_evaluate(c, str(tmp_path), log=lambda *_: None)
  summary = _strict(tmp_path / 'summary.json')
  assert summary['status'].startswith('non-finite')


# ---- through scripts/train.py -------------------------------------------------------------
CONFIG = """
import ml_collections
from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.dataset, c.model, c.num_clients = 'digits', 'logreg', 8
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.local_steps, c.batch_size = 2, 8
  c.hparams = {{'client_lr': 0.1, 'server_lr': 1.0}}
  c.num_rounds, c.eval_every, c.eval_train_samples, c.checkpoint_every = {rounds}, 2, 50, 2
  c.sweep = ml_collections.ConfigDict({{'hparams': {{'client_lr': {lrs}}}, 'seed': [0]}})
  return c
"""


def _config_file(tmp_path, rounds, lrs):
  path = tmp_path / f'sweep_{rounds}_{len(lrs)}.py'
  path.write_text(CONFIG.format(rounds=rounds, lrs=list(lrs)))
  return str(path)


def _train(config, work, timeout=300):
  cmd = [sys.executable, 'scripts/train.py', f'--config={config}', f'--workdir={work}']
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV, timeout=timeout)
  return proc.returncode, proc.stdout + proc.stderr


def test_diverged_replica_is_named_and_the_exit_status_says_so(tmp_path):
  config = _config_file(tmp_path, 6, (0.05, 1e30))
  rc, out = _train(config, tmp_path / 'sweep')
  lines = [line for line in out.splitlines() if line.strip()]
  assert rc == 1 and 'Traceback' not in out, out
  assert lines[-1].startswith('stopped: sweep: 2 runs, 1 completed, 1 diverged'), lines[-1]
  assert 'client_lr=1e+30,seed=0 (diverged at step' in lines[-1], lines[-1]
  summary = _strict(tmp_path / 'sweep' / 'summary.json')
  ok, bad = summary['runs']
  assert ok['status'] == 'completed' and math.isfinite(ok['test_loss'])
  assert bad['status'].startswith('stopped: diverged at step '), bad
  step, what = bad['diverged']['step'], bad['diverged']['quantity']
  assert bad['status'] == f'stopped: diverged at step {step} ({what})'
  assert 0 <= step < 6 and what
  # No number pretends to be a result: every accuracy and loss of the diverged run is null.
  assert all(bad[k] is None for k in bad if k.endswith(('accuracy', 'loss'))), bad
  # Its records say where: the first record after the step holds the stop reason.
  with open(tmp_path / 'sweep' / 'client_lr=1e+30,seed=0' / 'metrics.jsonl') as f:
    records = [json.loads(line) for line in f]
  stops = [r for r in records if 'stopped' in r]
  assert len(stops) == 1 and f'at server step {step}' in stops[0]['stopped']
  assert 'stopped' in (tmp_path / 'sweep' / 'summary.md').read_text()
  # Run again: nothing computed, the same last line and exit status.
  rc2, out2 = _train(config, tmp_path / 'sweep')
  assert rc2 == 1 and out2.splitlines()[-1] == lines[-1], out2


def _wait_for(path, proc, timeout=240):
  t0 = time.monotonic()
  while not os.path.exists(path):
    assert proc.poll() is None, proc.communicate()
    assert time.monotonic() - t0 < timeout
    time.sleep(0.05)


@pytest.fixture(scope='module')
def whole(tmp_path_factory):
  """A 40-step sweep of 2 runs through scripts/train.py, uninterrupted: (config, workdir)."""
  tmp = tmp_path_factory.mktemp('whole')
  config = _config_file(tmp, 40, (0.05, 0.1))
  rc, out = _train(config, tmp / 'sweep')
  assert rc == 0, out
  return config, tmp / 'sweep'


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_signal_mid_sweep_then_rerun_equals_uninterrupted(whole, tmp_path, sig):
  config, reference = whole
  work = tmp_path / 'cut'
  cmd = [sys.executable, 'scripts/train.py', f'--config={config}', f'--workdir={work}']
  proc = subprocess.Popen(
    cmd,
    cwd=ROOT,
    env=ENV,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=default_signals,
  )
  _wait_for(work / 'groups' / '0' / 'checkpoints' / '4' / checkpoint.MANIFEST, proc)
  proc.send_signal(sig)
  stdout, stderr = proc.communicate(timeout=120)
  if sig == signal.SIGINT:
    assert proc.returncode == 130, (stdout, stderr)
    assert 'Traceback' not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith('interrupted (Ctrl-C): 0 of 2 runs'), stderr
    record = _strict(work / workdir_lib.SWEEP_FILE)
    assert record['status'].startswith('interrupted') and not record['complete']
  else:  # no Python cleanup: the default action of SIGKILL, SIGTERM and SIGHUP
    assert proc.returncode == -sig
  assert not (work / 'summary.json').exists()
  assert all((work / n / 'metrics.jsonl').exists() for n in ('client_lr=0.05,seed=0',))
  rc, out = _train(config, work)
  assert rc == 0, out
  assert 'group 0: resumed from its checkpoint at server step' in out, out
  assert _metrics(work) == _metrics(reference)
  assert _strict(work / 'summary.json')['runs'] == _strict(reference / 'summary.json')['runs']
