"""Result records are whole or absent: written together atomically, read only when whole.

A kill or a failed write during :func:`afl_jax.reproduction.runs.write` leaves the previous
records and manifest as they were (or, killed between the two renames, a pair that is
refused for its digest); a symlink at a record's path is replaced, never followed; every
damaged or mismatched pair (a manifest reduced to no sweeps, missing seeds, a truncated
gzip, a non-JSON manifest, a missing column, a non-numeric cell, another row count or
digest) is refused in one line naming the file, by the library and by report.py.
"""

import gzip
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from afl_jax.errors import UserError
from afl_jax.reproduction import records, runs

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEL, TEST = [0, 1, 2], list(range(3, 13))
LRS = (0.1, 0.3)


def _setting(lr):
  return runs.setting_key({'hparams.client_lr': lr})


def _frame(test_seeds=TEST):
  rows = []
  for phase, lrs, seeds in (('select', LRS, SEL), ('test', (0.3,), test_seeds)):
    for lr in lrs:
      for seed in seeds:
        for step in (0, 10):
          rows.append(
            {
              'experiment': 'toy',
              'method': 'A',
              'phase': phase,
              'setting': _setting(lr),
              'seed': seed,
              'step': step,
              'wall_clock': 2.0 * step,
              'bytes_up': 1e6 * step,
              'val_accuracy': 0.1 + lr * step / 10 + seed / 1000,
              'val_loss': float('nan') if seed == 2 else 1.0,  # a diverged run's NaN is valid
              'test_accuracy': 0.2 + lr * step / 10,
              'test_loss': 1.0,
              'run': f'{phase}{lr}{seed}',  # the run's identity
            }
          )
  return pd.DataFrame(rows)


def _sweeps(test_seeds=TEST):
  base = {'experiment': 'toy', 'method': 'A', 'config': 'c'}
  select = records.sweep_identity(f'select{lr}{s}' for lr in LRS for s in SEL)
  test = records.sweep_identity(f'test0.3{s}' for s in test_seeds)
  return [
    base | {'phase': 'select', 'setting': '*', 'seeds': SEL, 'runs': 6, 'identity': select},
    base | {'phase': 'test', 'setting': _setting(0.3), 'seeds': TEST, 'runs': 10, 'identity': test},
  ]


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
  assert '\n' not in text
  for m in match:
    assert m in text, text
  return text


def test_a_written_pair_reads_back_and_states_its_rows_and_digest(pair):
  frame, sweeps = runs.read('toy', str(pair))
  assert len(frame) == len(_frame()) and len(sweeps) == 2
  manifest = json.loads((pair / 'toy.json').read_text())
  data = (pair / 'toy.csv.gz').read_bytes()
  assert manifest['records'] == {'rows': len(_frame()), 'sha256': hashlib.sha256(data).hexdigest()}
  assert sorted(os.listdir(pair)) == ['toy.csv.gz', 'toy.json']  # no temporary file left


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
  assert len(runs.read('toy', str(pair))[0]) == len(_frame())


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


def _write_killed_at(d, at):
  code = _KILL.format(tests=str(ROOT / 'tests'), at=at, d=str(d))
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  proc = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, timeout=120)
  assert proc.returncode == -9, proc.stderr


def test_killed_before_the_renames_the_previous_pair_is_whole(pair):
  before = _files(pair)
  _write_killed_at(pair, 1)
  after = {k: v for k, v in _files(pair).items() if not k.startswith('.')}  # temporaries
  assert after == before
  assert len(runs.read('toy', str(pair))[0]) == len(_frame())


def test_killed_between_the_renames_the_pair_is_refused(pair):
  _write_killed_at(pair, 2)  # new records, old manifest
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


def _rewrite_manifest(d, edit):
  manifest = json.loads((d / 'toy.json').read_text())
  edit(manifest)
  (d / 'toy.json').write_text(json.dumps(manifest))


def test_a_manifest_reduced_to_no_sweeps_is_refused(pair):
  (pair / 'toy.json').write_text('{"sweeps": []}')
  _refused(pair, 'toy.json', 'no row count and digest')
  _rewrite_manifest(pair, lambda m: m.update(records={'rows': 50, 'sha256': 'x'}))
  _refused(pair, 'toy.csv.gz', 'rows belong to no sweep of the manifest')


def test_records_missing_seeds_are_refused(pair):
  # The records rewritten on 5 of the 10 test seeds while the manifest lists 10.
  frame = _frame(test_seeds=TEST[:5])
  data = records.encode(frame, 'toy.csv.gz')
  (pair / 'toy.csv.gz').write_bytes(data)
  _rewrite_manifest(
    pair,
    lambda m: m.update(records={'rows': len(frame), 'sha256': hashlib.sha256(data).hexdigest()}),
  )
  _refused(pair, 'toy.csv.gz', 'sweep toy/A/test', 'missing 5 of its 10 seeds')


def test_runs_rows_and_digest_must_match_the_manifest(pair):
  _rewrite_manifest(pair, lambda m: m['sweeps'][0].update(runs=9))
  _refused(pair, 'toy/A/select', 'hold 6 runs where the manifest lists 9')
  _rewrite_manifest(pair, lambda m: (m['sweeps'][0].update(runs=6), m['records'].update(rows=7)))
  _refused(pair, f'{len(_frame())} rows where the manifest lists 7')
  _rewrite_manifest(pair, lambda m: m['records'].update(rows=len(_frame()), sha256='0' * 64))
  _refused(pair, 'SHA-256 differs')


def _rewrite_csv(d, edit):
  text = gzip.decompress((d / 'toy.csv.gz').read_bytes()).decode()
  (d / 'toy.csv.gz').write_bytes(gzip.compress(edit(text).encode()))


@pytest.mark.parametrize(
  'damage, match',
  [
    (
      lambda d: (d / 'toy.csv.gz').write_bytes((d / 'toy.csv.gz').read_bytes()[:300]),
      'not a whole gzip',
    ),
    (lambda d: (d / 'toy.csv.gz').write_bytes(b'not gzip'), 'not a whole gzip'),
    (lambda d: (d / 'toy.json').write_text('{"sweeps": ['), 'not a readable JSON manifest'),
    (lambda d: (d / 'toy.json').write_text('[1, 2]'), 'not a records manifest'),
    (lambda d: (d / 'toy.json').unlink(), 'the records have no manifest'),
    (lambda d: (d / 'toy.csv.gz').unlink(), 'missing, while the manifest lists 2 sweeps'),
    (
      lambda d: _rewrite_manifest(d, lambda m: m['sweeps'][1].pop('seeds')),
      'sweep 1 lacks seeds',
    ),
    (
      lambda d: _rewrite_csv(d, lambda t: re.sub(r',[^,\n]*\n', '\n', t)),  # the last column
      'missing column run',
    ),
    (
      lambda d: _rewrite_csv(d, lambda t: t.replace(',1.0,select', ',abc,select', 1)),
      "row 1 column test_loss holds 'abc', not a number",
    ),
    (
      lambda d: _rewrite_csv(d, lambda t: t.replace(',0,0,', ',zero,0,', 1)),
      "column seed holds 'zero', not an integer",
    ),
    (lambda d: _rewrite_csv(d, lambda t: t + t.splitlines()[1] + '\n'), 'duplicate rows'),
  ],
)
def test_damaged_files_are_refused_in_one_line(pair, damage, match):
  damage(pair)
  text = _refused(pair, match)
  assert str(pair) in text


def test_neither_file_is_no_records(tmp_path):
  frame, sweeps = runs.read('toy', str(tmp_path))
  assert frame.empty and sweeps == []
  assert list(frame.columns) == runs.KEYS + runs.METRIC_COLUMNS + [records.RUN]


def test_rows_of_other_runs_and_a_pair_from_before_identities_are_one_line(pair):
  _rewrite_manifest(pair, lambda m: m['sweeps'][0].update(identity='0' * 32))
  _refused(pair, 'sweep toy/A/select: its rows are of other runs than its identity')
  _rewrite_manifest(
    pair, lambda m: [s.update(fingerprint='f') or s.pop('identity') for s in m['sweeps']]
  )
  _refused(pair, 'written before runs had identities', 'reproduce.py --paper=toy --migrate')


def _script(name, *args):
  return subprocess.run(
    [sys.executable, str(ROOT / 'scripts' / name), *args],
    capture_output=True,
    text=True,
    env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=str(ROOT)),
    timeout=300,
  )


def _one_line(proc, start):
  assert proc.returncode == 1 and 'Traceback' not in proc.stderr, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(start), lines
  return lines[0]


def test_report_refuses_a_mismatched_pair_before_writing_any_page(tmp_path):
  src = ROOT / 'docs' / 'results' / 'records'
  recs = tmp_path / 'records'
  recs.mkdir()
  for name in ('fedgm.csv.gz', 'fedgm.json'):
    shutil.copy(src / name, recs / name)
  manifest = json.loads((recs / 'fedgm.json').read_text())
  manifest['sweeps'][-1]['seeds'] = manifest['sweeps'][-1]['seeds'][:-1]
  (recs / 'fedgm.json').write_text(json.dumps(manifest))
  pages_dir = tmp_path / 'pages'
  pages_dir.mkdir()
  for args in ((), ('--write',)):
    proc = _script('report.py', f'--records_dir={recs}', f'--out_dir={pages_dir}', *args)
    line = _one_line(proc, 'error: ')
    assert 'fedgm.csv.gz' in line and 'the manifest does not list' in line
  assert list(pages_dir.iterdir()) == []
  (recs / 'fedgm.json').write_text('{"sweeps": []}')
  line = _one_line(
    _script('report.py', f'--records_dir={recs}', '--write', f'--out_dir={pages_dir}'), 'error: '
  )
  assert 'fedgm.json' in line and 'no row count and digest' in line
  assert list(pages_dir.iterdir()) == []


def test_reproduce_test_phase_without_selection_records_is_one_line():
  proc = _script(
    'reproduce.py',
    '--paper=masfl',
    '--only=fig1_noniid_t600',
    '--phase=test',
    '--out_dir=/nonexistent',
  )
  line = _one_line(proc, 'error: --phase=test: experiment fig1_noniid_t600 of masfl has no')
  assert 'run --phase=select' in line


def test_report_refuses_a_records_dir_that_is_not_one(tmp_path):
  proc = _script('report.py', f'--records_dir={tmp_path / "nope"}')
  _one_line(proc, f'error: --records_dir={tmp_path / "nope"} is invalid: not an existing dir')


def _marked(*statuses):
  return [s | {'status': st} for s, st in zip(_sweeps(), statuses)]


def test_each_row_states_its_sweeps_status(tmp_path):
  runs.write('toy', _frame(), _marked('superseded', 'current'), str(tmp_path))
  frame, sweeps = runs.read('toy', str(tmp_path))
  assert records.marked(sweeps) and list(frame.columns)[-1] == 'status'
  expected = frame.phase.map({'select': 'superseded', 'test': 'current'})  # by hand
  assert (frame.status == expected).all()
  # Written again from what was read (status column and all): the same bytes.
  before = (tmp_path / 'toy.csv.gz').read_bytes()
  runs.write('toy', frame, sweeps, str(tmp_path))
  assert (tmp_path / 'toy.csv.gz').read_bytes() == before
  # A reader filtering the CSV by status gets the current sweep's rows and no others.
  plain = pd.read_csv(tmp_path / 'toy.csv.gz')
  assert set(plain[plain.status == 'current'].phase) == {'test'}


def _rewrite_status(d, edit):
  """The records' CSV edited, the manifest's row count and digest made to match (so the
  status check, not the digest, is what refuses)."""
  text = gzip.decompress((d / 'toy.csv.gz').read_bytes()).decode()
  data = gzip.compress(edit(text).encode())
  (d / 'toy.csv.gz').write_bytes(data)
  rows = len(pd.read_csv(d / 'toy.csv.gz'))
  _rewrite_manifest(
    d, lambda m: m.update(records={'rows': rows, 'sha256': hashlib.sha256(data).hexdigest()})
  )


def test_a_wrong_status_is_refused(tmp_path):
  runs.write('toy', _frame(), _marked('current', 'current'), str(tmp_path))
  good = _files(tmp_path)
  # One row of the current test sweep says superseded.
  _rewrite_status(tmp_path, lambda t: t.replace(',current\n', ',superseded\n', 1))
  _refused(tmp_path, "sweep toy/A/select is 'current' in the manifest but 1 of its rows say")
  for name, data in good.items():
    (tmp_path / name).write_bytes(data)
  _rewrite_status(tmp_path, lambda t: t.replace(',current\n', ',stale\n', 1))
  _refused(tmp_path, "row 1 column status holds 'stale', not one of current, superseded")
  for name, data in good.items():
    (tmp_path / name).write_bytes(data)
  _rewrite_manifest(tmp_path, lambda m: m['sweeps'][1].update(status='superseded'))
  _refused(tmp_path, "is 'superseded' in the manifest but 20 of its rows say 'current'")
  _rewrite_manifest(tmp_path, lambda m: m['sweeps'][1].pop('status'))
  _refused(tmp_path, 'toy.json', 'status column but sweep toy/A/test', 'states no status')
  with pytest.raises(records.RecordsError, match="has status 'old', not one of"):
    runs.write('toy', _frame(), _marked('current', 'old'), str(tmp_path))


def test_a_pair_without_the_status_column_reads_as_unmarked(pair):
  # Written before the column existed (or by code that drops it): readable, unmarked,
  # and a status its manifest states is ignored until the pair is written with one.
  _rewrite_manifest(pair, lambda m: m['sweeps'][0].update(status='current'))
  frame, sweeps = runs.read('toy', str(pair))
  assert 'status' not in frame.columns and not records.marked(sweeps)
  assert len(frame) == len(_frame())


def test_a_second_writer_of_the_same_records_is_refused_in_one_line(tmp_path):
  """reproduce.py and report.py --write lock their records dir: two writers at once would
  write over each other's rows (runs.lock_records)."""
  recs = tmp_path / 'records'
  recs.mkdir()
  shutil.copy(ROOT / 'examples' / 'extending' / 'my_claims.py', tmp_path / 'my_claims.py')
  for name in ('my_components.py', 'my_config.py', 'jobs.csv'):
    shutil.copy(ROOT / 'examples' / 'extending' / name, tmp_path / name)
  holder = subprocess.Popen(
    [
      sys.executable,
      '-c',
      'import sys, time; from afl_jax.pipeline import workdir; '
      'workdir.acquire(sys.argv[1]); print("held", flush=True); time.sleep(120)',
      str(recs),
    ],
    stdout=subprocess.PIPE,
    text=True,
    env=dict(os.environ, PYTHONPATH=str(ROOT)),
  )
  try:
    assert holder.stdout.readline().strip() == 'held'
    pages_dir = tmp_path / 'pages'
    pages_dir.mkdir()
    line = _one_line(
      _script('report.py', f'--records_dir={recs}', f'--out_dir={pages_dir}', '--write'),
      'error: the records in',
    )
    assert f'pid {holder.pid}' in line and 'one reproduce.py or report.py --write' in line
    assert list(pages_dir.iterdir()) == []
    proc = _script('reproduce.py', f'--paper={tmp_path / "my_claims.py"}', '--out_dir=/nonexistent')
    line = _one_line(proc, 'error: the records in')
    assert f'pid {holder.pid}' in line
    assert sorted(p.name for p in recs.iterdir()) == ['.lock']  # nothing was written
  finally:
    holder.kill()
    holder.wait()
