"""Issue 31, single runs: a rerun of a workdir equals one uninterrupted run of its config,
or is refused before compute with one line naming the field or file; nothing is lost.

* extending a finished run's ``num_rounds`` (the ring plan keeps the jobs still
  running after the last step, and a resume moves the ring slots where the longer
  plan reads them): bitwise equal to the uninterrupted longer run;
* a run's identity (data digest, device count, engine plan) is recorded and a resume
  on other data or another device count is refused;
* hand-damaged workdirs (truncated metrics, missing or malformed run.json, files
  replaced by directories) are repaired without a gap or refused in one line;
* a stop that is not on a checkpoint boundary still leaves a checkpoint.

Each comparison is against an uninterrupted run of the same program (bitwise: the same
program replays the same inputs); the ring plan is checked against a plain replay of
which version each slot holds.
"""

import json
import os
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from data_files_test import write_fmnist as write_fake
from experiment_test import tiny
from helper_runs import one_error_line, run_train

from afl_jax import schedules
from afl_jax.core import ring
from afl_jax.errors import ResumeError, UserError
from afl_jax.pipeline import checkpoint, loop, metrics_io, run_identity

QUIET = {'log': lambda *_: None}


def train(workdir, **overrides):
  return loop.train_and_evaluate(tiny(**overrides), str(workdir), **QUIET)


def records(workdir):
  return metrics_io.read_metrics(workdir)


def snapshot(workdir):
  """Every file under ``workdir`` with its bytes (to show nothing was touched)."""
  out = {}
  for root, _, names in os.walk(workdir):
    for name in names:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        out[os.path.relpath(path, workdir)] = f.read()
  return out


def one_line(error):
  msg = str(error.value)
  assert isinstance(error.value, UserError) and '\n' not in msg, msg
  return msg


# ---- the ring plan: a function of the past and of the jobs still running -------------------


def replay_reads(sched, p, held):
  """Check every read of ``sched`` against a replay of the ring's contents from ``held``."""
  held = dict(enumerate(held))
  for t in range(sched.num_steps):
    for j in np.flatnonzero(sched.mask[t]):
      assert held[int(p.read_slot[t, j])] == sched.start_step[t, j], (t, j)
    held[int(p.write_slot[t + 1])] = t + 1


BUILDERS = {
  'fedbuff': lambda t: schedules.fedbuff(20, 6, 3, t, seed=1),
  'fully_async': lambda t: schedules.fully_async(20, 6, t, seed=2),
  'port': lambda t: schedules.fedbuff(20, 6, 2, t, staleness_bound=3, seed=3),
  'waiting_windows': lambda t: schedules.waiting_windows(
    12, t, window=1.0, durations=schedules.durations.make('uniform', low=0.3, high=2.5), seed=4
  ),
}


def keeping(make, t):
  """The plan of ``make(t)`` keeping the jobs still running after step t (as loop.ring_plan)."""
  return ring.plan(make(t), ring.pending_versions(make(2 * t), t))


@pytest.mark.parametrize('kind', sorted(BUILDERS))
def test_the_plan_of_t_steps_is_the_prefix_of_the_plan_of_more(kind):
  make, t = BUILDERS[kind], 40
  short = keeping(make, t)
  for longer in (t + 7, 2 * t):
    long_plan = keeping(make, longer)
    np.testing.assert_array_equal(short.write_slot, long_plan.write_slot[: t + 1])
    # The slots the short run leaves are where the longer run reads: replay the longer
    # schedule's steps t.. from the short run's ring.
    sched = make(longer)
    held = np.zeros(long_plan.size, np.int64)
    held[: short.size] = ring.held_versions(short, t)
    contents = dict(enumerate(held))
    for s in range(t, longer):
      for j in np.flatnonzero(sched.mask[s]):
        assert contents[int(long_plan.read_slot[s, j])] == sched.start_step[s, j], (s, j)
      contents[int(long_plan.write_slot[s + 1])] = s + 1
  replay_reads(make(t), short, np.zeros(short.size, np.int64))


def test_a_schedule_drawn_whole_keeps_nothing_past_its_end():
  # random_staleness draws all its cohorts first: 2T steps have another past than T, so
  # no running jobs are read off it (loop.ring_plan) and its extension is refused.
  make = lambda t: schedules.random_staleness(20, 4, t, window=7, seed=3)
  assert checkpoint.first_difference(make(40), make(80), 40) is not None


def test_without_the_running_jobs_the_short_plan_overwrites_what_the_longer_one_reads():
  # Why the plan keeps them: the whole-schedule plan of 40 steps frees the slots of jobs
  # that arrive after step 40, and step 40's ring lacks versions the 60-step run reads.
  make = BUILDERS['fully_async']
  held = ring.held_versions(ring.plan(make(40)), 40)
  sched = make(60)
  late = sched.start_step[40:][sched.mask[40:]]
  assert set(late[late <= 40].tolist()) - set(held.tolist())


def test_the_ring_does_not_grow_for_keeping_the_running_jobs():
  # Numbers (also in docs/reliability.md): ring sizes with / without the running jobs.
  for kind, make in BUILDERS.items():
    for t in (40, 200):
      grown = keeping(make, t).size - ring.plan(make(t)).size
      assert grown == 0, (kind, t, grown)


def test_remap_moves_each_version_to_the_slot_the_new_plan_reads():
  sched = BUILDERS['fedbuff'](30)
  p = ring.plan(sched)
  last = ring.last_use(sched)
  want = ring.held_versions(p, 12)
  shuffled = want[::-1].copy()  # the same versions, other slots
  idx = ring.remap(shuffled, p, last, 12)
  np.testing.assert_array_equal(shuffled[idx], want)
  lacking = np.where(shuffled == want[p.write_slot[12]], -1, shuffled)  # drop version 12
  assert ring.remap(lacking, p, last, 12) == 12


# ---- extending num_rounds, and stops between checkpoints ------------------------------------

RUN = {'num_rounds': 30, 'eval_every': 5, 'checkpoint_every': 10}


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """One uninterrupted 30-step run (evaluations every 5 steps, checkpoints every 10)."""
  workdir = tmp_path_factory.mktemp('reference')
  train(workdir, **RUN)
  return records(workdir)


@pytest.fixture(scope='module')
def stopped(tmp_path_factory):
  """The same run stopped after 15 steps: checkpoints at 10 and (the stop) 15."""
  workdir = tmp_path_factory.mktemp('stopped')
  summary = train(workdir, **RUN, stop_after_steps=15)
  assert summary['status'] == 'stopped' and summary['steps'] == 15
  return workdir


def copy_of(src, tmp_path, name='run'):
  dst = tmp_path / name
  shutil.copytree(src, dst)
  return dst


def test_a_stop_between_checkpoints_leaves_one_and_the_rerun_equals_the_whole_run(
  reference, stopped, tmp_path
):
  assert checkpoint.Checkpointer(stopped).steps() == [10, 15]
  workdir = copy_of(stopped, tmp_path)
  train(workdir, **RUN)
  assert records(workdir) == reference


def test_a_moved_workdir_with_an_odd_path_resumes_to_the_whole_run(reference, stopped, tmp_path):
  workdir = copy_of(stopped, tmp_path, name='moved run é ü #1')
  train(workdir, **RUN)
  assert records(workdir) == reference


def test_extending_a_finished_run_equals_the_longer_run(reference, tmp_path):
  short = {**RUN, 'num_rounds': 20}
  train(tmp_path, **short)
  assert [r['step'] for r in records(tmp_path)][-1] == 20
  # Extended to 30 and stopped at 25 (a checkpoint written under the longer plan), then
  # finished: both resumes read their start models where the longer plan put them.
  assert train(tmp_path, **RUN, stop_after_steps=5)['steps'] == 25
  train(tmp_path, **RUN)
  assert records(tmp_path) == reference
  run = json.loads((tmp_path / 'checkpoints' / 'run.json').read_text())
  assert run['num_steps'] == 30 and run['config']['num_rounds'] == 30


def test_a_checkpoint_with_another_ring_layout_is_moved_where_the_plan_reads(
  reference, stopped, tmp_path
):
  # A checkpoint written under another plan: its ring slots reversed and one more slot,
  # its manifest saying so. The resume moves every slot to where this run's plan reads it.
  workdir = copy_of(stopped, tmp_path)
  ck = checkpoint.Checkpointer(workdir)
  item = ck.manager.restore(15, args=ocp.args.StandardRestore())
  meta = json.loads((workdir / 'checkpoints' / '15' / checkpoint.MANIFEST).read_text())
  held = np.asarray(meta['ring_versions'])
  order = np.r_[np.arange(len(held))[::-1], 0]
  item['sim']['ring'] = jax.tree.map(lambda r: np.asarray(r)[order], item['sim']['ring'])
  meta = {'metrics_steps': meta['metrics_steps'], 'ring_versions': held[order].tolist()}
  ck.save(15, item['sim'], item['host'], meta)  # the original goes to damaged_checkpoints/
  ck.close()
  train(workdir, **RUN)
  assert records(workdir) == reference


def test_an_extension_whose_start_model_is_gone_is_refused_naming_num_rounds(
  stopped, tmp_path, monkeypatch
):
  workdir = copy_of(stopped, tmp_path)
  manifest = workdir / 'checkpoints' / '15' / checkpoint.MANIFEST
  meta = json.loads(manifest.read_text())
  meta['ring_versions'] = [0] * len(meta['ring_versions'])  # as if only version 0 were kept
  manifest.write_text(json.dumps(meta))
  before = snapshot(workdir)
  with pytest.raises(ResumeError) as e:
    train(workdir, **{**RUN, 'num_rounds': 40})
  assert 'num_rounds' in one_line(e) and 'broadcast of server step' in str(e.value)
  assert snapshot(workdir) == before


# ---- hand-damaged workdirs -------------------------------------------------------------------


def keep_records(workdir, steps):
  path = workdir / 'metrics.jsonl'
  lines = [line for line in path.read_text().splitlines() if json.loads(line)['step'] in steps]
  path.write_text(''.join(line + '\n' for line in lines))


def test_truncated_metrics_resume_from_the_checkpoint_whose_records_are_all_there(
  reference, stopped, tmp_path, capsys
):
  workdir = copy_of(stopped, tmp_path)
  keep_records(workdir, {0, 5, 10})  # the record of step 15 was lost
  train(workdir, **RUN)
  assert 'resuming from the checkpoint at step 10' in capsys.readouterr().err
  assert records(workdir) == reference  # no gap, the same numbers


@pytest.mark.parametrize('kept', [{0, 5}, {0, 5, 15}, set()])
def test_metrics_without_the_records_of_any_checkpoint_are_refused(stopped, tmp_path, kept):
  workdir = copy_of(stopped, tmp_path)
  if kept:
    keep_records(workdir, kept)
  else:
    os.remove(workdir / 'metrics.jsonl')
  before = snapshot(workdir)
  with pytest.raises(ResumeError) as e:
    train(workdir, **RUN)
  assert 'metrics.jsonl lacks evaluation records' in one_line(e) and '--noresume' in str(e.value)
  assert snapshot(workdir) == before


DAMAGE = {
  'run.json deleted': (lambda w: os.remove(w / 'checkpoints' / 'run.json'), 'no run.json'),
  'run.json a list': (
    lambda w: (w / 'checkpoints' / 'run.json').write_text('[1, 2]'),
    'run.json holds a list',
  ),
  'run.json string step': (
    lambda w: (w / 'checkpoints' / 'run.json').write_text(
      json.dumps({**json.loads((w / 'checkpoints' / 'run.json').read_text()), 'num_steps': '30'})
    ),
    'field \'num_steps\' is "30"',
  ),
  'metrics.jsonl a directory': (
    lambda w: (os.remove(w / 'metrics.jsonl'), os.mkdir(w / 'metrics.jsonl')),
    'metrics.jsonl is not a regular file',
  ),
  'metrics string step': (
    lambda w: (w / 'metrics.jsonl').write_text(
      (w / 'metrics.jsonl').read_text().replace('"step": 5,', '"step": "5",')
    ),
    'line 2 is not a JSON record',
  ),
  'checkpoints a file': (
    lambda w: (shutil.rmtree(w / 'checkpoints'), (w / 'checkpoints').write_text('x')),
    'checkpoints is not a directory',
  ),
}


@pytest.mark.parametrize('case', sorted(DAMAGE))
def test_hand_damaged_workdir_is_one_line_and_nothing_is_touched(stopped, tmp_path, case):
  workdir = copy_of(stopped, tmp_path)
  damage, fragment = DAMAGE[case]
  damage(workdir)
  before = snapshot(workdir)
  with pytest.raises(UserError) as e:
    train(workdir, **RUN)
  assert fragment in one_line(e)
  assert snapshot(workdir) == before
  assert os.path.isdir(workdir / 'metrics.jsonl') == (case == 'metrics.jsonl a directory')


def test_deleted_run_json_through_the_script_is_one_error_line(stopped, tmp_path):
  workdir = copy_of(stopped, tmp_path)
  os.remove(workdir / 'checkpoints' / 'run.json')
  before = snapshot(workdir)
  rc, out = run_train(
    workdir,
    '--config=configs/digits_smoke.py',
    '--config.num_clients=12',
    timeout=300,
    AFL_JAX_CPU_DEVICES='1',
  )
  one_error_line(rc, out, 'run.json', '--noresume')
  assert snapshot(workdir) == before


# ---- run identity: data and devices ---------------------------------------------------------

ENGINE = {'devices': 1, 'platform': 'cpu', 'num_slots': 2, 'block_size': 2, 'adaptive_steps': False}


def recorded(workdir, cfg, sched, **identity):
  from pipeline_checkpoint_test import host, state

  ident = {'data_sha256': 'a' * 64, 'num_steps': sched.num_steps, 'engine': dict(ENGINE)}
  ident.update(identity)
  ck = checkpoint.Checkpointer(workdir)
  ck.record_run(cfg, sched, identity=ident)
  ck.save(4, state(4), host(4))
  ck.close()
  return ident


@pytest.mark.parametrize(
  'change, fragment',
  [
    ({'data_sha256': 'b' * 64}, 'config.data_dir'),
    ({'engine': {**ENGINE, 'devices': 2}}, 'device count changes from 1 to 2'),
    ({'engine': {**ENGINE, 'platform': 'gpu'}}, 'device count changes from 1 cpu to 1 gpu'),
    ({'engine': {**ENGINE, 'num_slots': 4}}, 'num_slots 2 -> 4'),
  ],
)
def test_an_identity_change_is_refused_naming_it(tmp_path, change, fragment):
  from pipeline_checkpoint_test import config, fedbuff

  ident = recorded(tmp_path, config(), fedbuff(12))
  before = snapshot(tmp_path)
  with pytest.raises(ResumeError) as e:
    checkpoint.Checkpointer(tmp_path).check_resume(config(), fedbuff(12), {**ident, **change})
  assert fragment in one_line(e)
  assert snapshot(tmp_path) == before
  assert checkpoint.Checkpointer(tmp_path).check_resume(config(), fedbuff(12), ident) == 4


def test_extending_an_algorithm_that_reads_num_rounds_is_refused(tmp_path):
  from pipeline_checkpoint_test import config, fedbuff

  ident = recorded(tmp_path, config(algorithm='masfl'), fedbuff(12))
  longer = {**ident, 'num_steps': 16}
  with pytest.raises(ResumeError) as e:
    checkpoint.Checkpointer(tmp_path).check_resume(
      config(algorithm='masfl', num_rounds=16), fedbuff(16), longer
    )
  assert "algorithm 'masfl' derives its rates from num_rounds" in one_line(e)
  other = tmp_path / 'fedbuff'  # FedBuff's rates do not: extended from step 4
  recorded(other, config(algorithm='fedbuff'), fedbuff(12))
  ck = checkpoint.Checkpointer(other)
  assert ck.check_resume(config(algorithm='fedbuff', num_rounds=16), fedbuff(16), longer) == 4


def fmnist_run(data_dir, **overrides):
  return tiny(
    dataset='fmnist',
    data_dir=str(data_dir),
    model='mlp',
    num_clients=6,
    num_rounds=10,
    eval_every=5,
    checkpoint_every=5,
    eval_train_samples=60,
    **overrides,
  )


def test_data_digest_names_what_changes_and_ignores_where_it_lives(tmp_path):
  from afl_jax.pipeline.build import build_data

  arrays, _ = write_fake(tmp_path / 'a', n_train=120, n_test=30)
  shutil.copytree(tmp_path / 'a', tmp_path / 'copy')
  shifted = {'train_y': None}
  from data_files_test import idx_bytes

  shifted['train_y'] = idx_bytes((arrays['train_y'] + 1) % 10)
  write_fake(tmp_path / 'shifted', n_train=120, n_test=30, **shifted)
  digest = lambda d: run_identity.data_digest(build_data(fmnist_run(tmp_path / d)))
  assert digest('a') == digest('copy')
  assert digest('a') != digest('shifted')  # labels only


def test_resume_on_other_data_is_refused_and_on_the_same_data_elsewhere_resumes(
  tmp_path, monkeypatch
):
  arrays, _ = write_fake(tmp_path / 'data', n_train=120, n_test=30)
  from data_files_test import idx_bytes

  write_fake(
    tmp_path / 'shifted', n_train=120, n_test=30, train_y=idx_bytes(arrays['train_y'] // 2)
  )
  whole = tmp_path / 'whole'
  loop.train_and_evaluate(fmnist_run(tmp_path / 'data'), str(whole), **QUIET)
  work = tmp_path / 'work'
  loop.train_and_evaluate(fmnist_run(tmp_path / 'data', stop_after_steps=5), str(work), **QUIET)
  run = json.loads((work / 'checkpoints' / 'run.json').read_text())
  assert run['data_sha256'] == json.loads((whole / 'summary.json').read_text())['data_sha256']
  assert run['engine']['devices'] >= 1
  before = snapshot(work)
  with pytest.raises(ResumeError) as e:
    loop.train_and_evaluate(fmnist_run(tmp_path / 'shifted'), str(work), **QUIET)
  assert 'config.data_dir' in one_line(e) and 'shifted' in str(e.value)
  monkeypatch.setenv('AFL_JAX_DATA', str(tmp_path / 'shifted'))
  with pytest.raises(ResumeError) as e:
    loop.train_and_evaluate(fmnist_run(''), str(work), **QUIET)
  assert 'AFL_JAX_DATA' in one_line(e)
  assert snapshot(work) == before
  # The same files at another path (data_dir is where, not what): resumes, same numbers.
  shutil.copytree(tmp_path / 'data', tmp_path / 'moved')
  loop.train_and_evaluate(fmnist_run(tmp_path / 'moved'), str(work), **QUIET)
  assert records(work) == records(whole)


def test_resume_with_another_cpu_device_count_is_refused(tmp_path):
  args = ['--config=configs/digits_smoke.py', '--config.num_clients=12', '--config.num_rounds=20']
  args += ['--config.checkpoint_every=10']
  devices = lambda n: {'XLA_FLAGS': f'--xla_force_host_platform_device_count={n}'}
  rc, out = run_train(tmp_path, *args, '--config.stop_after_steps=10', **devices(2))
  assert rc == 0, out
  assert json.loads((tmp_path / 'checkpoints' / 'run.json').read_text())['engine']['devices'] == 2
  before = snapshot(tmp_path)
  rc, out = run_train(tmp_path, *args, **devices(1))
  one_error_line(rc, out, 'device count changes from 2 to 1', '--noresume')
  assert snapshot(tmp_path) == before


# ---- kills at any moment still resume to the uninterrupted run ------------------------------

SCRIPT = ['--config=configs/digits_smoke.py', '--config.num_clients=12', '--config.num_rounds=30']
SCRIPT += ['--config.eval_every=5', '--config.checkpoint_every=10']
ONE_DEVICE = {'XLA_FLAGS': '--xla_force_host_platform_device_count=1'}


@pytest.fixture(scope='module')
def script_reference(tmp_path_factory):
  workdir = tmp_path_factory.mktemp('script_reference')
  rc, out = run_train(workdir, *SCRIPT, **ONE_DEVICE)
  assert rc == 0, out
  return records(workdir)


@pytest.mark.slow
@pytest.mark.parametrize('sig', ['SIGKILL', 'SIGINT', 'SIGTERM', 'SIGHUP'])
def test_a_killed_run_resumes_to_the_uninterrupted_run(script_reference, tmp_path, sig):
  import signal
  import subprocess
  import sys
  import time

  from helper_runs import ROOT, default_signals

  workdir = tmp_path / 'run'
  proc = subprocess.Popen(
    [sys.executable, 'scripts/train.py', f'--workdir={workdir}', *SCRIPT],
    cwd=ROOT,
    preexec_fn=default_signals,
    env={**os.environ, 'JAX_PLATFORMS': 'cpu', **ONE_DEVICE},
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )
  manifest = workdir / 'checkpoints' / '10' / checkpoint.MANIFEST
  deadline = time.time() + 240
  while not manifest.exists() and proc.poll() is None and time.time() < deadline:
    time.sleep(0.05)
  proc.send_signal(getattr(signal, sig))  # mid-way through steps 10-20, or just after 10
  _, err = proc.communicate(timeout=60)
  assert proc.returncode != 0  # stopped before its end
  if sig == 'SIGINT':  # Ctrl-C: one line, exit 130, the status recorded with the metrics
    assert proc.returncode == 130 and 'Traceback' not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith('interrupted (Ctrl-C) after server step'), err
    status = json.loads((workdir / 'summary.json').read_text())['status']
    assert status.startswith('interrupted (Ctrl-C) after server step'), status
  rc, out = run_train(workdir, *SCRIPT, **ONE_DEVICE)
  assert rc == 0, out
  assert records(workdir) == script_reference
