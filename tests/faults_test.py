"""Faults and hazards through the scripts and the Python API: one writer per workdir (a busy
one refused at once naming its holder, a killed holder's taken over, a sweep and a single run
never over each other's outputs); each bad input, path or environment one ``error:`` line
with nothing written; a full disk one line and the rerun resumes; every script refuses an
unknown flag; grids too large for the host refused, groups too large for the devices split."""

import contextlib
import errno
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import types

import psutil
import pytest
from helper_runs import run_train

from afl_jax.core import memory
from afl_jax.errors import ConfigError, UserError
from afl_jax.pipeline import checkpoint, cli, devices, loop, metrics_io, sweep
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import workdir as workdir_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE = ['--config=configs/digits_smoke.py', '--config.num_rounds=4', '--config.eval_every=2']
ENV = {**os.environ, 'JAX_PLATFORMS': 'cpu'}
HOLD = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location('w', sys.argv[1])
w = importlib.util.module_from_spec(spec)
spec.loader.exec_module(w)
lock = w.acquire(sys.argv[2])
print('ready', flush=True)
time.sleep(120)
"""


def _tiny(**changes):
  """A digits config that compiles and runs in seconds."""
  c = config_lib.default()
  c.dataset, c.model, c.num_clients = 'digits', 'logreg', 8
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.local_steps, c.batch_size = 2, 8
  c.hparams = {'client_lr': 0.1, 'server_lr': 1.0}
  c.num_rounds, c.eval_every, c.eval_train_samples = 6, 2, 50
  for k, v in changes.items():
    c[k] = v
  return c


def _grid(**changes):
  c = _tiny(**changes)
  c.sweep = {'hparams': {'client_lr': [0.05, 0.1]}, 'seed': [0, 1]}
  return c


def assert_one_line(rc, out, *fragments):
  """Exit status 1, no traceback, and the whole output is one ``error:`` line with ``fragments``."""
  lines = [line for line in out.splitlines() if line.strip()]
  assert rc == 1, (rc, out)
  assert 'Traceback' not in out, out
  assert len(lines) == 1 and lines[0].startswith('error: '), out
  for f in fragments:
    assert f in lines[0], (f, lines[0])
  return lines[0]


def assert_user_line(error, *fragments):
  """A UserError whose message is one line (scripts print it as ``error: <message>``)."""
  text = str(error.value)
  assert isinstance(error.value, UserError) and '\n' not in text, text
  for f in fragments:
    assert f in text, (f, text)
  return text


@contextlib.contextmanager
def _hold(path):
  """A process holding ``path``'s lock (the library's, loaded as scripts/train.py loads it)."""
  module = os.path.join(ROOT, 'afl_jax', 'pipeline', 'workdir.py')
  proc = subprocess.Popen(
    [sys.executable, '-c', HOLD, module, str(path)], stdout=subprocess.PIPE, text=True
  )
  try:
    assert proc.stdout.readline().strip() == 'ready'
    yield proc
  finally:
    proc.kill()
    proc.wait()


# ---- one writer per workdir ---------------------------------------------------------------


def test_busy_workdir_is_refused_at_once_naming_the_holder(tmp_path):
  work = tmp_path / 'run'
  with _hold(work) as holder:
    t0 = time.monotonic()
    subprocess.run([sys.executable, '-c', 'pass'], env=ENV, check=True)
    python_start = time.monotonic() - t0
    t0 = time.monotonic()
    rc, out = run_train(work, *SMOKE, timeout=60)
    seconds = time.monotonic() - t0
    line = assert_one_line(rc, out, 'is in use by', f'pid {holder.pid}', 'on host')
    assert 'started' in line and 'choose another --workdir' in line
    assert seconds < 1.0 or seconds < python_start + 0.5, (seconds, python_start)
    assert sorted(os.listdir(work)) == [workdir_lib.LOCK_FILE]  # nothing written
    assert workdir_lib.holder(work)['pid'] == holder.pid  # the holder's lock is untouched
    # The Python API: a single run and a sweep refuse it too, before building anything.
    with pytest.raises(workdir_lib.WorkdirBusyError) as e:
      loop.train_and_evaluate(_tiny(), str(work), log=lambda *_: None)
    assert_user_line(e, f'pid {holder.pid}')
    with pytest.raises(workdir_lib.WorkdirBusyError):
      sweep.train_sweep(_grid(), str(work), log=lambda *_: None)
    assert sorted(os.listdir(work)) == [workdir_lib.LOCK_FILE]


def test_a_run_folder_of_a_running_sweep_is_locked_with_it(tmp_path):
  """One writer per run folder, sweeps included: a single run started into a run folder of a
  running sweep (which holds the sweep's workdir) is refused in one line naming the sweep's
  pid, and a sweep refuses a workdir one of whose folders another process writes."""
  with _hold(tmp_path / 'sweep') as holder:
    rc, out = run_train(tmp_path / 'sweep' / 'seed=0', *SMOKE, timeout=60)
    assert_one_line(rc, out, 'sweep/seed=0 is inside', 'which is in use by', f'pid {holder.pid}')
    assert sorted(os.listdir(tmp_path / 'sweep')) == [workdir_lib.LOCK_FILE]  # nothing written
  with _hold(tmp_path / 'other' / 'seed=0') as holder:
    with pytest.raises(workdir_lib.WorkdirBusyError) as e:
      sweep.train_sweep(_grid(), str(tmp_path / 'other'), log=lambda *_: None)
    assert_user_line(e, 'holds', 'seed=0, which is in use by', f'pid {holder.pid}')
  with workdir_lib.acquire(tmp_path / 'other'):  # a dead holder's lock file is no writer
    pass


def test_workdir_of_a_killed_holder_is_taken_over(tmp_path):
  work = tmp_path / 'run'
  with _hold(work) as holder:
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
  assert workdir_lib.holder(work)['pid'] == holder.pid  # stale content, no live holder
  with workdir_lib.acquire(work) as lock:
    assert lock.owner and workdir_lib.holder(work)['pid'] == os.getpid()
  assert not os.path.exists(work / workdir_lib.LOCK_FILE)  # released, file removed
  # Re-acquiring in the process that holds it is a no-op (scripts lock before the library).
  with workdir_lib.acquire(work) as outer, workdir_lib.acquire(work) as inner:
    assert outer.owner and not inner.owner


def test_a_sweep_refuses_a_single_run_workdir_and_the_reverse(tmp_path):
  single = tmp_path / 'single'
  single.mkdir()
  files = {'config.json': '{}', 'metrics.jsonl': '{"step": 0}\n', 'summary.json': '{"a": 1}'}
  for name, text in files.items():
    (single / name).write_text(text)
  with pytest.raises(UserError) as e:
    sweep.train_sweep(_grid(), str(single), log=lambda *_: None)
  assert_user_line(e, 'holds a single run (config.json)', 'summary.json and plot.png')
  assert sorted(os.listdir(single)) == sorted(files)  # nothing written
  swept = tmp_path / 'swept'
  swept.mkdir()
  (swept / 'summary.json').write_text('{"runs": []}')
  with pytest.raises(UserError) as e:
    loop.train_and_evaluate(_tiny(), str(swept), log=lambda *_: None)
  assert_user_line(e, 'holds a sweep')
  (single / 'config.json').unlink()  # a summary.json of no run: neither overwrites it
  for train in (loop.train_and_evaluate, sweep.train_sweep):
    with pytest.raises(UserError) as e:
      train(_grid() if train is sweep.train_sweep else _tiny(), str(single), log=lambda *_: None)
    assert_user_line(e, 'holds a summary.json of no run')
  assert (single / 'summary.json').read_text() == '{"a": 1}'


def _two_of_four(c):
  """(a device limit that fits 2 of the 4 replicas of ``c``'s grid by the engine's analytic
  estimate, the grid's built runs)."""
  runs = [sweep.build_lib.build_run(sweep.point_config(c, p)) for p in sweep.grid(c)]
  total = {}
  for r in (1, 4):
    sim, keys, params0 = sweep._group_sim(runs[:r], sweep.traced_fields(c))
    total[r] = sim.estimate(params0, keys)['total']
  return int((total[1] + 1.5 * (total[4] - total[1]) / 3) / 0.9), runs


def test_an_interrupted_sweep_keeps_its_finished_runs_and_splits_to_fit(tmp_path, monkeypatch):
  work = str(tmp_path / 'sweep')
  c = _grid()
  limit, _ = _two_of_four(c)
  calls, real = [], sweep._run_group

  def interrupted(*args, **kw):
    calls.append(1)
    if len(calls) == 2:
      raise KeyboardInterrupt  # Ctrl-C during the second group
    return real(*args, **kw)

  logs = []
  monkeypatch.setattr(sweep, '_run_group', interrupted)
  with pytest.raises(KeyboardInterrupt):
    sweep.train_sweep(c, work, log=logs.append, memory_limit_bytes=limit)
  monkeypatch.setattr(sweep, '_run_group', real)
  assert any('split into 2 groups of <= 2 runs' in line for line in logs), logs
  summary = json.loads(open(os.path.join(work, 'summary.json')).read())
  assert not summary['complete']
  assert sorted(r['status'] for r in summary['runs']) == ['completed'] * 2 + ['not started'] * 2
  logs = []
  out = sweep.train_sweep(c, work, log=logs.append, memory_limit_bytes=limit)
  assert out['complete'] and len(out['runs']) == 4 and len(out['groups']) == 1
  assert any('(2 finished earlier, reused)' in line for line in logs), logs
  kept = {n: open(os.path.join(work, n), 'rb').read() for n in ('summary.json', 'plot.png')}
  with pytest.raises(UserError) as e:  # the same sweep with more rounds: refused
    sweep.train_sweep(_grid(num_rounds=8), work, log=lambda *_: None)
  assert_user_line(e, 'holds a run of other inputs', 'config.num_rounds 6 -> 8')
  assert {n: open(os.path.join(work, n), 'rb').read() for n in kept} == kept


def test_the_grouping_does_not_depend_on_the_free_memory(monkeypatch):
  """The split is a function of the config and the machine's total memory: the same groups
  (the same program) whatever memory is free at the start."""
  c = _grid()
  limit, runs = _two_of_four(c)
  build = lambda ms: sweep._group_sim([runs[i] for i in ms], sweep.traced_fields(c), limit)
  splits = []
  for free in (2**20, 100 * limit):
    machine = types.SimpleNamespace(total=int(limit * memory.CPU_STATE_FACTOR), available=free)
    monkeypatch.setattr(psutil, 'virtual_memory', lambda m=machine: m)
    assert abs(sweep.group_limit() - limit) <= 1
    groups = sweep._fit_groups([[0, 1, 2, 3]], build, sweep.group_limit(), print, {})
    splits.append([members for members, _ in groups])
  assert splits == [[[0, 1], [2, 3]]] * 2


def test_grid_too_large_for_the_host_is_refused_before_it_is_built(tmp_path):
  c = _tiny()
  values = [0.01 * (i + 1) for i in range(100)]
  c.sweep = {'hparams': {'client_lr': values, 'server_lr': values}, 'seed': list(range(100))}
  work = tmp_path / 'big' / 'grid'
  t0 = time.monotonic()
  with pytest.raises(ConfigError) as e:
    sweep.train_sweep(c, str(work), log=lambda *_: None)
  assert time.monotonic() - t0 < 30
  assert_user_line(e, 'config.sweep is invalid', '1,000,000 runs', 'per run', 'runs fit: shorten')
  assert not (tmp_path / 'big').exists()  # nothing written, not even the directory


# ---- full or read-only disk -----------------------------------------------------------------


def test_a_file_size_limit_during_a_checkpoint_is_one_line_and_the_rerun_resumes(tmp_path):
  """EFBIG (``ulimit -f``) while saving a checkpoint: one line naming its folder, the metrics
  so far kept; the rerun without the limit ends equal to an uninterrupted run."""
  args = [*SMOKE, '--config.checkpoint_every=2']
  cmd = [sys.executable, 'scripts/train.py', f'--workdir={tmp_path / "cut"}', *args]
  limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # 8 x 512 bytes
  proc = subprocess.run(
    cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, preexec_fn=limit, timeout=300
  )
  line = assert_one_line(1, proc.stderr, 'checkpoints/2 while saving the checkpoint of server')
  assert proc.returncode == 1 and 'File too large [errno 27]' in line
  assert [r['step'] for r in metrics_io.read_metrics(tmp_path / 'cut')] == [0, 2]
  assert run_train(tmp_path / 'cut', *args)[0] == 0
  c = config_lib.load_file(os.path.join(ROOT, 'configs', 'digits_smoke.py'))
  c.num_rounds, c.eval_every, c.checkpoint_every = 4, 2, 2  # SMOKE, in-process
  loop.train_and_evaluate(c, str(tmp_path / 'whole'), log=lambda *_: None)
  whole = (tmp_path / 'whole' / 'metrics.jsonl').read_bytes()
  assert (tmp_path / 'cut' / 'metrics.jsonl').read_bytes() == whole


def test_a_full_disk_is_one_line_naming_the_file(tmp_path, monkeypatch):
  usage = shutil.disk_usage(tmp_path)._replace(free=0)
  monkeypatch.setattr(checkpoint.shutil, 'disk_usage', lambda p: usage)
  with pytest.raises(workdir_lib.WorkdirError) as e:
    loop.train_and_evaluate(_tiny(checkpoint_every=2), str(tmp_path / 'run'), log=lambda *_: None)
  assert_user_line(e, 'run/checkpoints/2 while saving the checkpoint', 'No space left on device')
  monkeypatch.undo()
  real_encode = metrics_io.encode_record

  def encode(step, scalars):  # the line of step 4 does not fit on the disk
    if step == 4:
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_encode(step, scalars)

  monkeypatch.setattr(metrics_io, 'encode_record', encode)
  with pytest.raises(workdir_lib.WorkdirError) as e:
    loop.train_and_evaluate(_tiny(), str(tmp_path / 'other'), log=lambda *_: None)
  assert_user_line(e, 'other/metrics.jsonl while writing the metrics after server step 2')
  assert [r['step'] for r in metrics_io.read_metrics(tmp_path / 'other')] == [0, 2]


def test_unwritable_workdir_is_one_line(tmp_path, monkeypatch):
  real_open = os.open

  def read_only(path, *args, **kw):
    if str(path).endswith(workdir_lib.LOCK_FILE):
      raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
    return real_open(path, *args, **kw)

  monkeypatch.setattr(workdir_lib.os, 'open', read_only)
  with pytest.raises(workdir_lib.WorkdirError) as e:
    loop.train_and_evaluate(_tiny(), str(tmp_path / 'ro' / 'run'), log=lambda *_: None)
  assert_user_line(e, 'is not writable', 'Read-only file system')
  assert not (tmp_path / 'ro').exists()


def test_config_file_errors_name_file_and_line(tmp_path):
  cases = {
    'syntax': ('def get_config(:\n  pass\n', ':1: ', 'syntax error'),
    'raises': ('x = 1\ndef get_config():\n  raise RuntimeError("boom")\n', ':3: ', 'boom'),
    'dict': ('def get_config():\n  return {"a": 1}\n', 'returned a dict', 'ConfigDict'),
    'module': ('import no_such_module_here\n', ':1: ', 'ModuleNotFoundError'),
    'none': ('x = 1\n', 'no get_config()', ''),
  }
  for name, (text, *fragments) in cases.items():
    path = tmp_path / f'{name}.py'
    path.write_text(text)
    line = cli.check_config_file(str(path))
    assert line and '\n' not in line and str(path) in line, (name, line)
    assert all(f in line for f in fragments), (name, line)


def test_cpu_devices_env_is_checked(monkeypatch):
  for value in ('abc', '0', '-1', '1.5'):
    monkeypatch.setenv('AFL_JAX_CPU_DEVICES', value)
    with pytest.raises(SystemExit) as e:
      devices.set_cpu_devices()
    assert str(e.value).startswith('error: $AFL_JAX_CPU_DEVICES=') and '\n' not in str(e.value)
  monkeypatch.setenv('AFL_JAX_CPU_DEVICES', '3')
  assert devices.env_devices() == 3


# torch_reference.py is the benchmark's PyTorch loop, run by a Python of its own venv (not
# afl_jax's command line; PyTorch is no dependency of the project).
SCRIPTS = sorted(
  os.path.basename(p)
  for p in glob.glob(os.path.join(ROOT, 'scripts', '*.py'))
  if os.path.basename(p) != 'torch_reference.py'
)


def _tree(root):
  """{relative path: (size, mtime_ns)} of every file under ``root``."""
  out = {}
  for d, _, files in os.walk(root):
    for f in files:
      st = os.stat(os.path.join(d, f))
      out[os.path.relpath(os.path.join(d, f), root)] = (st.st_size, st.st_mtime_ns)
  return out


def _run_scripts(runs):
  """``{name: (script, args, cwd, extra env)}`` run all at once -> ``{name: (rc, out, err)}``."""
  procs = {
    name: subprocess.Popen(
      [sys.executable, os.path.join(ROOT, 'scripts', script), *args],
      cwd=cwd,
      env={**ENV, **env},
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for name, (script, args, cwd, env) in runs.items()
  }
  out = {}
  for name, proc in procs.items():
    stdout, stderr = proc.communicate(timeout=300)
    out[name] = (proc.returncode, stdout, stderr)
  return out


@pytest.fixture(scope='module')
def flag_results(tmp_path_factory):
  """Every script run with ``--bogus_flag=1`` (and train.py with ``--help``), each in its own
  empty directory (their default outputs are relative to it; docs/results is checked):
  ``{(script, flag): (exit status, stdout, stderr, files written)}``."""
  before = _tree(os.path.join(ROOT, 'docs', 'results'))
  runs = [(script, '--bogus_flag=1') for script in SCRIPTS] + [('train.py', '--help')]
  cwds = {run: tmp_path_factory.mktemp(run[0].replace('.py', '')) for run in runs}
  results = _run_scripts({(s, flag): (s, [flag], cwd, {}) for (s, flag), cwd in cwds.items()})
  assert _tree(os.path.join(ROOT, 'docs', 'results')) == before  # no page rewritten
  return {run: (*results[run], sorted(os.listdir(cwd))) for run, cwd in cwds.items()}


@pytest.mark.parametrize('script', SCRIPTS)
def test_every_script_refuses_an_unknown_flag_in_one_line(flag_results, script):
  """Exit status 1, nothing on stdout, one ``error:`` line on stderr, nothing written."""
  rc, stdout, stderr, written = flag_results[script, '--bogus_flag=1']
  assert rc == 1, (rc, stdout, stderr)
  assert stdout == '', stdout
  assert stderr.splitlines() == [
    'error: --bogus_flag is not a flag of this script (see --helpshort)'
  ], stderr
  assert written == [], written  # not even train.py's default runs/default


def test_help_exits_zero_and_writes_nothing(flag_results):
  """--help: the usage and exit status 0; train.py does not even lock its default workdir."""
  rc, stdout, stderr, written = flag_results['train.py', '--help']
  assert rc == 0, stderr
  assert 'flags' in stdout.lower() and 'Traceback' not in stderr
  assert written == [], written


@pytest.mark.parametrize(
  'argv, fragment',
  [
    (['prog', '--bogus_flag'], '--bogus_flag is not a flag of this script'),
    (['prog', 'extra'], "unexpected argument 'extra'"),
    (['prog', '--config=/no/such/config.py'], "--config='/no/such/config.py' is invalid"),
  ],
)
def test_flags_parser_refuses_unknown_flags_and_stray_arguments(argv, fragment):
  with pytest.raises(SystemExit) as e:
    cli.flags_parser()(argv)
  text = str(e.value)
  assert text.startswith('error: ') and fragment in text and '\n' not in text, text


# ---- every bad input through the scripts: one line, nothing written ----------------------------


BAD_INPUTS = {  # (script and arguments, fragments of the one line, working directory)
  'empty_workdir': (['train.py', '--workdir=', *SMOKE], ["--workdir=''"], ROOT),
  'workdir_is_a_file': (['train.py', '--workdir={tmp}/afile', *SMOKE], ['existing file'], ROOT),
  'outside_the_repository': (['train.py', '--workdir={tmp}/w1', *SMOKE],
    ["--config='configs/digits_smoke.py' is invalid", 'no such file', '{tmp}'], '{tmp}'),
  'outside_the_repository_default_config': (['train.py', '--workdir={tmp}/w2', '--config.bogus=1'],
    ["config has no field 'bogus'"], '{tmp}'),
  'plot_nonexistent': (['plot.py', '{tmp}/nonexistent', '--out={tmp}/out.png'],
    ['nonexistent is not a directory'], ROOT),
  'benchmark_unknown_task': (['benchmark.py', '--tasks=nope'], ["'nope'"], ROOT),
  'plot_unsupported_format': (['plot.py', '{tmp}/afile', '--out={tmp}/x.txt'],
    ['--out={tmp}/x.txt is invalid', 'must be one of', 'png'], ROOT),
  'plot_loss_target_no_accuracy_bound': (['plot.py', '{tmp}/afile', '--target=1.5'],
    ['--target=1.5 is invalid', 'accuracy in (0, 1]'], ROOT),
}  # fmt: skip


@pytest.fixture(scope='module')
def script_results(tmp_path_factory):
  """{tmp}, ``{case: (exit status, stdout and stderr, the files in {tmp} after)}``, run at once."""
  tmp = tmp_path_factory.mktemp('scripts')
  (tmp / 'afile').write_text('not a directory')
  fill = lambda v: v.replace('{tmp}', str(tmp))
  runs = {n: (a[0], [*map(fill, a[1:])], fill(cwd), {}) for n, (a, _, cwd) in BAD_INPUTS.items()}
  results = _run_scripts(runs)
  after = sorted(os.listdir(tmp))
  return tmp, {n: (rc, out + '\n' + err, after) for n, (rc, out, err) in results.items()}


@pytest.mark.parametrize('name', BAD_INPUTS)
def test_bad_input_is_one_line_and_writes_nothing(script_results, name):
  tmp, results = script_results
  rc, out, after = results[name]
  assert_one_line(rc, out, *[f.replace('{tmp}', str(tmp)) for f in BAD_INPUTS[name][1]])
  assert after == ['afile'], after  # no workdir, no plot written
