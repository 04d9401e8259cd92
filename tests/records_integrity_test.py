"""Result records are whole or absent: written together atomically, read only when whole; a
damaged or mismatched pair is refused in one line naming the file, also by report.py."""

import gzip
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from afl_jax import reproduction
from afl_jax.errors import UserError
from afl_jax.reproduction import records, runs

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEL, TEST = [0, 1, 2], list(range(3, 13))
LRS = (0.1, 0.3)


def _setting(lr):
  return runs.setting_key({'hparams.client_lr': lr})


def _frame(test_seeds=TEST):
  rows = [
    {'experiment': 'toy', 'method': 'A', 'phase': phase, 'setting': _setting(lr), 'seed': seed}
    | {'step': step, 'wall_clock': 2.0 * step, 'bytes_up': 1e6 * step}
    | {'val_accuracy': 0.1 + lr * step / 10 + seed / 1000, 'test_accuracy': 0.2 + lr * step / 10}
    | {'val_loss': float('nan') if seed == 2 else 1.0, 'test_loss': 1.0}  # NaN: diverged, valid
    | {'run': f'{phase}{lr}{seed}'}  # the run's identity
    for phase, lrs, seeds in (('select', LRS, SEL), ('test', (0.3,), test_seeds))
    for lr in lrs
    for seed in seeds
    for step in (0, 10)
  ]
  return pd.DataFrame(rows)


def _sweeps(*statuses):
  base = {'experiment': 'toy', 'method': 'A', 'steps': 10}
  select = records.sweep_identity(f'select{lr}{s}' for lr in LRS for s in SEL)
  test = records.sweep_identity(f'test0.3{s}' for s in TEST)
  out = [
    base | {'phase': 'select', 'setting': '*', 'seeds': SEL, 'runs': 6, 'identity': select},
    base | {'phase': 'test', 'setting': _setting(0.3), 'seeds': TEST, 'runs': 10, 'identity': test},
  ]
  return [s | {'status': st} for s, st in zip(out, statuses)] if statuses else out


@pytest.fixture
def pair(tmp_path):
  runs.write('toy', _frame(), _sweeps(), str(tmp_path))
  return tmp_path


def _files(d):
  return {p.name: p.read_bytes() for p in d.iterdir()}


def _refused(d, *match):
  with pytest.raises(records.RecordsError) as info:
    runs.read('toy', str(d))
  text = str(info.value)
  assert '\n' not in text and str(d) in text, text
  for m in match:
    assert m in text, text


def test_a_written_pair_reads_back_bit_for_bit_and_states_its_rows_and_digest(pair):
  frame, sweeps = runs.read('toy', str(pair))
  want = _frame().sort_values(runs.KEYS).reset_index(drop=True)
  cols = runs.METRIC_COLUMNS
  np.testing.assert_array_equal(frame[cols].to_numpy(float), want[cols].to_numpy(float))
  assert sorted(sweeps, key=repr) == sorted((dict(sorted(s.items())) for s in _sweeps()), key=repr)
  manifest = json.loads((pair / 'toy.json').read_text())
  data = (pair / 'toy.csv.gz').read_bytes()
  assert manifest['records'] == {'rows': len(_frame()), 'sha256': hashlib.sha256(data).hexdigest()}
  assert sorted(os.listdir(pair)) == ['toy.csv.gz', 'toy.json']  # no temporary file left
  runs.write('toy', frame, sweeps, str(pair))
  assert (pair / 'toy.csv.gz').read_bytes() == data  # same rows, same bytes


def test_committed_records_match_their_manifests_and_rewrite_to_the_same_bytes():
  for key in ('fedgm', 'fedecho'):
    frame, sweeps = runs.read(key)  # checked: sweeps, seeds, runs, rows, digest
    path = ROOT / 'docs' / 'results' / 'records' / f'{key}.csv.gz'
    assert records.encode(frame, path.name) == path.read_bytes()


def test_a_failed_write_keeps_the_previous_pair(pair, monkeypatch):
  before = _files(pair)
  real = os.fsync
  calls = []

  def full(fd):
    calls.append(fd)
    if len(calls) == 2:  # the manifest's temporary file: the records' one is written
      raise OSError(28, 'No space left on device')
    real(fd)

  monkeypatch.setattr(os, 'fsync', full)
  with pytest.raises(records.RecordsError, match=r'No space left on device \[errno 28\]; the prev'):
    runs.write('toy', _frame(test_seeds=TEST[:5]), _sweeps(), str(pair))
  monkeypatch.undo()
  assert _files(pair) == before  # nothing replaced, no temporary file left


_KILL = """
import os, signal, sys
from afl_jax.reproduction import runs
sys.path.insert(0, {tests!r})
from records_integrity_test import _frame, _sweeps, TEST
real, n = os.replace, []
def replace(a, b):
  n.append(a)
  if len(n) == {at}:
    os.kill(os.getpid(), signal.SIGKILL)
  real(a, b)
os.replace = replace
runs.write('toy', _frame(test_seeds=TEST[:5]), _sweeps(), {d!r})
"""


@pytest.mark.parametrize('at', [1, 2])
def test_a_write_killed_at_a_rename_leaves_the_previous_pair_or_a_refused_one(pair, at):
  before = _files(pair)
  code = _KILL.format(tests=str(ROOT / 'tests'), at=at, d=str(pair))
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  proc = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, timeout=120)
  assert proc.returncode == -9, proc.stderr
  if at == 1:  # before the renames: the previous pair, whole
    assert {k: v for k, v in _files(pair).items() if not k.startswith('.')} == before
    assert len(runs.read('toy', str(pair))[0]) == len(_frame())
  else:  # new records, old manifest
    _refused(pair, 'toy.csv.gz', 'missing 5 of its 10 seeds [8, 9, 10, 11, 12]')


def test_a_symlink_at_a_record_path_is_refused_and_its_target_untouched(tmp_path):
  target = tmp_path / 'elsewhere.txt'
  target.write_text('keep me')
  out = tmp_path / 'records'
  out.mkdir()
  (out / 'toy.json').symlink_to(target)
  with pytest.raises(UserError, match='toy.json is a symbolic link'):
    runs.write('toy', _frame(), _sweeps(), str(out))
  assert target.read_text() == 'keep me' and sorted(os.listdir(out)) == ['toy.json']


def _manifest(edit):
  def damage(d):
    manifest = json.loads((d / 'toy.json').read_text())
    edit(manifest)
    (d / 'toy.json').write_text(json.dumps(manifest))

  return damage


def _csv(edit, digest=False):
  """The records' CSV edited; ``digest``: the manifest made to match (another check refuses)."""

  def damage(d):
    data = gzip.compress(edit(gzip.decompress((d / 'toy.csv.gz').read_bytes()).decode()).encode())
    (d / 'toy.csv.gz').write_bytes(data)
    if digest:
      rows = len(pd.read_csv(d / 'toy.csv.gz'))
      sha = hashlib.sha256(data).hexdigest()
      _manifest(lambda m: m.update(records={'rows': rows, 'sha256': sha}))(d)

  return damage


def _write(name, text):
  return lambda d: (d / name).write_text(text)


def _fewer_test_seeds(d):
  data = records.encode(_frame(test_seeds=TEST[:5]), 'toy.csv.gz')
  (d / 'toy.csv.gz').write_bytes(data)
  rows, sha = len(_frame(test_seeds=TEST[:5])), hashlib.sha256(data).hexdigest()
  _manifest(lambda m: m.update(records={'rows': rows, 'sha256': sha}))(d)


def _sweep(i, **fields):
  return _manifest(lambda m: m['sweeps'][i].update(**fields))


def _stated(**fields):
  return _manifest(lambda m: m['records'].update(**fields))


DAMAGED = [
  (
    lambda d: (d / 'toy.csv.gz').write_bytes((d / 'toy.csv.gz').read_bytes()[:300]),
    'not a whole gzip',
  ),
  (_write('toy.csv.gz', 'not gzip'), 'not a whole gzip'),
  (_write('toy.json', '{"sweeps": ['), 'not a readable JSON manifest'),
  (_write('toy.json', '[1, 2]'), 'not a records manifest'),
  (_write('toy.json', '{"sweeps": []}'), 'toy.json: the manifest states no row count and digest'),
  (_manifest(lambda m: m.update(sweeps=[])), 'rows belong to no sweep of the manifest'),
  (lambda d: (d / 'toy.json').unlink(), 'the records have no manifest'),
  (lambda d: (d / 'toy.csv.gz').unlink(), 'missing, while the manifest lists 2 sweeps'),
  (_manifest(lambda m: m['sweeps'][1].pop('seeds')), 'sweep 1 lacks seeds'),
  (_manifest(lambda m: m['sweeps'][1].pop('steps')), 'sweep 1 lacks steps'),
  (_sweep(1, steps=20), ('sweep toy/A/test', 'ends at step 10, before its last step 20')),
  (_sweep(0, runs=9), 'toy/A/select: the records hold 6 runs where the manifest lists 9'),
  (_stated(rows=7), f'{len(_frame())} rows where the manifest lists 7'),
  (_stated(sha256='0' * 64), 'SHA-256 differs'),
  (_sweep(0, identity='0' * 32), 'toy/A/select: its rows are of other runs than its identity'),
  (  # as written before runs had identities
    _manifest(lambda m: [s.update(fingerprint='f') or s.pop('identity') for s in m['sweeps']]),
    'written before runs had identities',
  ),
  (_fewer_test_seeds, ('sweep toy/A/test', 'missing 5 of its 10 seeds')),
  (_csv(lambda t: re.sub(r',[^,\n]*\n', '\n', t)), 'missing column run'),  # the last column
  (_csv(lambda t: t.replace(',1.0,select', ',abc,select', 1)), "test_loss holds 'abc', not a"),
  (_csv(lambda t: t.replace(',0,0,', ',zero,0,', 1)), "column seed holds 'zero', not an integer"),
  (_csv(lambda t: t + t.splitlines()[1] + '\n'), 'duplicate rows'),
]


@pytest.mark.parametrize('damage, match', DAMAGED)
def test_damaged_files_are_refused_in_one_line(pair, damage, match):
  damage(pair)
  _refused(pair, *((match,) if isinstance(match, str) else match))


def _status(new):
  return _csv(lambda t: t.replace(',current\n', f',{new}\n', 1), digest=True)


STATUS_DAMAGED = [
  (_status('superseded'), "toy/A/select is 'current' in the manifest but 1 of its rows"),
  (_status('stale'), "row 1 column status holds 'stale', not one of current, super"),
  (_sweep(1, status='superseded'), "is 'superseded' in the manifest but 20 of its rows say 'cur"),
  (
    _manifest(lambda m: m['sweeps'][1].pop('status')),
    ('status column but sweep toy/A/test', 'states no status'),
  ),
]


@pytest.mark.parametrize('damage, match', STATUS_DAMAGED)
def test_a_wrong_status_is_refused_in_one_line(tmp_path, damage, match):
  runs.write('toy', _frame(), _sweeps('current', 'current'), str(tmp_path))
  damage(tmp_path)
  _refused(tmp_path, *((match,) if isinstance(match, str) else match))


def test_each_row_states_its_sweeps_status(tmp_path):
  runs.write('toy', _frame(), _sweeps('superseded', 'current'), str(tmp_path))
  frame, sweeps = runs.read('toy', str(tmp_path))
  assert records.marked(sweeps) and list(frame.columns)[-1] == 'status'
  expected = frame.phase.map({'select': 'superseded', 'test': 'current'})  # by hand
  assert (frame.status == expected).all()
  before = (tmp_path / 'toy.csv.gz').read_bytes()
  runs.write('toy', frame, sweeps, str(tmp_path))  # the status column and all: same bytes
  assert (tmp_path / 'toy.csv.gz').read_bytes() == before
  plain = pd.read_csv(tmp_path / 'toy.csv.gz')  # a reader filtering the CSV by status
  assert set(plain[plain.status == 'current'].phase) == {'test'}
  with pytest.raises(records.RecordsError, match="has status 'old', not one of"):
    runs.write('toy', _frame(), _sweeps('current', 'old'), str(tmp_path))


def test_no_pair_is_no_records_and_one_without_the_status_column_is_unmarked(pair, tmp_path):
  frame, sweeps = runs.read('toy', str(tmp_path / 'none'))
  assert frame.empty and sweeps == []
  assert list(frame.columns) == runs.KEYS + runs.METRIC_COLUMNS + [records.RUN]
  # Written before the column existed: readable, unmarked, a status in its manifest ignored.
  _manifest(lambda m: m['sweeps'][0].update(status='current'))(pair)
  frame, sweeps = runs.read('toy', str(pair))
  assert 'status' not in frame.columns and not records.marked(sweeps)
  assert len(frame) == len(_frame())


def _script(name, *args):
  cmd = [sys.executable, str(ROOT / 'scripts' / name), *args]
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=str(ROOT))
  return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def _one_line(proc, start):
  assert proc.returncode == 1 and 'Traceback' not in proc.stderr, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(start), lines
  return lines[0]


def _fedgm_records(tmp_path, copy=True):
  recs, out = tmp_path / 'records', tmp_path / 'pages'
  recs.mkdir()
  out.mkdir()
  for name in ('fedgm.csv.gz', 'fedgm.json') if copy else ():
    shutil.copy(ROOT / 'docs' / 'results' / 'records' / name, recs / name)
  return recs, out


def test_report_writes_pages_from_records_and_then_finds_none_stale(tmp_path):
  recs, out = _fedgm_records(tmp_path)
  flags = (f'--records_dir={recs}', f'--out_dir={out}', '--papers=fedgm')
  write = _script('report.py', *flags, '--write')
  assert write.returncode == 0, write.stderr
  assert f'wrote {out / "fedgm.md"}' in write.stdout and (out / 'fedgm_forest.png').exists()
  before = {p: p.stat().st_mtime_ns for p in out.iterdir()}
  check = _script('report.py', *flags)
  assert check.returncode == 0 and 'stale pages (rebuild with --write): none' in check.stdout
  assert 'records with a stale status' not in check.stdout  # only with --restatus (minutes)
  assert {p: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_report_refuses_a_mismatched_pair_before_writing_any_page(tmp_path):
  recs, pages_dir = _fedgm_records(tmp_path)
  manifest = json.loads((recs / 'fedgm.json').read_text())
  manifest['sweeps'][-1]['seeds'] = manifest['sweeps'][-1]['seeds'][:-1]
  (recs / 'fedgm.json').write_text(json.dumps(manifest))
  proc = _script('report.py', f'--records_dir={recs}', f'--out_dir={pages_dir}', '--write')
  line = _one_line(proc, 'error: ')
  assert 'fedgm.csv.gz' in line and 'the records hold 9 runs where the manifest lists 10' in line
  assert list(pages_dir.iterdir()) == []


@pytest.mark.parametrize(
  'args, start',
  [
    (['--records_dir=/nonexistent'], 'error: --records_dir=/nonexistent is invalid: not an'),
    (['--papers=nope'], 'error: --papers'),
  ],
)
def test_report_refuses_bad_flags_in_one_line(args, start):
  _one_line(_script('report.py', *args), start)


def test_the_test_phase_without_selection_records_is_refused_in_one_line():
  paper = reproduction.load_paper('masfl')
  (exp,) = runs.selected(paper, ['fig1_noniid_t600'])
  with pytest.raises(UserError) as e:
    runs.selection_rows('masfl', exp)
  assert str(e.value).startswith('--phase=test: experiment fig1_noniid_t600 of masfl has no')
  assert 'run --phase=select' in str(e.value) and '\n' not in str(e.value)


def test_a_second_writer_of_the_same_records_is_refused_in_one_line(tmp_path):
  recs, pages_dir = _fedgm_records(tmp_path, copy=False)
  code = 'import sys, time; from afl_jax.pipeline import workdir; workdir.acquire(sys.argv[1]); '
  code += 'print("held", flush=True); time.sleep(120)'
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  cmd = [sys.executable, '-c', code, recs]
  holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
  try:
    assert holder.stdout.readline().strip() == 'held'
    match = f'pid {holder.pid} .*one reproduce.py or report.py --write'
    with pytest.raises(UserError, match=match):
      runs.lock_records(str(recs))
    proc = _script('report.py', f'--records_dir={recs}', f'--out_dir={pages_dir}', '--write')
    assert f'pid {holder.pid}' in _one_line(proc, 'error: the records in')
    assert list(pages_dir.iterdir()) == [] and sorted(p.name for p in recs.iterdir()) == ['.lock']
  finally:
    holder.kill()
    holder.wait()
