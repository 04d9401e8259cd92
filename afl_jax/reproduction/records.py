"""A paper's records (``<paper>.csv.gz``, one row per evaluation) and manifest
(``<paper>.json``: sweeps with their status, row count, SHA-256): one pair, replaced together,
read only when whole (docs/reliability.md#result-records)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from afl_jax.errors import UserError
from afl_jax.pipeline import record, workdir
from afl_jax.reproduction import spec

RECORDS = os.path.join(os.path.dirname(spec.CONFIGS), 'docs', 'results', 'records')

KEYS = ['experiment', 'method', 'phase', 'setting', 'seed', 'step']
METRIC_COLUMNS = ['wall_clock', 'bytes_up'] + [
  f'{s}_{m}' for s in ('val', 'test') for m in ('accuracy', 'loss')
]
RUN = 'run'  # the column of each row's run identity
COLUMNS = KEYS + METRIC_COLUMNS + [RUN]
TEXT_COLUMNS = ['experiment', 'method', 'phase', 'setting', RUN]
INT_COLUMNS = ['seed', 'step']
SWEEP_FIELDS = ('experiment', 'method', 'phase', 'setting', 'identity', 'seeds', 'runs', 'steps')
LEGACY = 'legacy:'  # a sweep from before run identities (superseded): its runs are unknown
PHASES = ('select', 'test')
STATUS = 'status'  # the column (and manifest field) of a sweep's status
STATUSES = ('current', 'superseded')
RESTORE = 'restore both files (git checkout) or rerun the reproduction'


class RecordsError(UserError):
  """Records or a manifest that are damaged or do not match each other."""


def paths(paper_key: str, records_dir: str) -> tuple[str, str]:
  return tuple(os.path.join(records_dir, f'{paper_key}.{ext}') for ext in ('csv.gz', 'json'))


def encode(frame: pd.DataFrame, name: str) -> bytes:
  """The gzipped CSV of ``frame`` named ``name`` (no timestamp)."""
  buf = io.BytesIO()
  buf.name = name  # the gzip header names the file, as for a path
  frame.to_csv(buf, index=False, compression={'method': 'gzip', 'mtime': 0})
  return buf.getvalue()


def sweep_identity(run_identities) -> str:
  """A sweep's identity: the digest of its runs' identities (in any order)."""
  return record.digest_of(sorted(set(run_identities)))[:32]


def marked(sweeps: Sequence[Mapping]) -> bool:
  """Whether ``sweeps`` all state a status (none: unmarked); RecordsError for a mix or a bad one."""
  have = [STATUS in s for s in sweeps]
  if any(have) and not all(have):
    raise RecordsError(f'sweep {label(sweeps[have.index(False)])} states no status while others do')
  for s in sweeps:
    if STATUS in s and s[STATUS] not in STATUSES:
      raise RecordsError(
        f'sweep {label(s)} has status {s[STATUS]!r}, not one of {", ".join(STATUSES)}'
      )
  return bool(sweeps) and all(have)


def sweep_rows(frame: pd.DataFrame, s: Mapping) -> pd.Series:
  """The rows of sweep ``s``: its seeds of its method in its phase (and setting, a test's)."""
  rows = (frame.experiment == s['experiment']) & (frame.method == s['method'])
  rows &= (frame.phase == s['phase']) & frame.seed.isin(s['seeds'])
  return rows & (frame.setting == s['setting']) if s['phase'] == 'test' else rows


def rows_of(frame: pd.DataFrame, sweeps: Sequence[Mapping]) -> pd.DataFrame:
  keep = pd.Series(False, index=frame.index)
  for s in sweeps:
    keep |= sweep_rows(frame, s)
  return frame[keep]


def diverged(last: pd.DataFrame) -> pd.Series:
  """Whether each run's last row has a non-finite test (or validation) score."""
  test, val = (
    ~np.isfinite(last[[f'{s}_accuracy', f'{s}_loss']].to_numpy(float)).all(axis=1)
    for s in ('test', 'val')
  )
  return pd.Series(test | (val & last['has_val'].to_numpy(bool)), index=last.index)


def last_rows(frame: pd.DataFrame) -> pd.DataFrame:
  """The last row of every run, with ``has_val`` (it has a validation split)."""
  runs_ = frame.sort_values('step', kind='stable').groupby(KEYS[:-1])
  last = runs_.tail(1).copy()
  last['has_val'] = runs_['val_accuracy'].transform('first').loc[last.index].notna()
  return last


def label(s: Mapping) -> str:
  where = f'{s["experiment"]}/{s["method"]}/{s["phase"]}'
  return where + (f' {s["setting"]}' if s['phase'] == 'test' else '')


def write(
  paper_key: str, frame: pd.DataFrame, sweeps: Sequence[Mapping], records_dir: str = RECORDS
) -> None:
  """Replace the pair of ``paper_key`` (sorted: same rows, same bytes; RecordsError: the
  previous pair is kept)."""
  records_path, manifest_path = paths(paper_key, records_dir)
  frame = frame.sort_values(KEYS, kind='stable').reset_index(drop=True)[COLUMNS]
  order = ('experiment', 'phase', 'method', 'setting')
  sweeps = sorted(sweeps, key=lambda m: (*(m[k] for k in order), min(m['seeds'])))
  try:
    if marked(sweeps):
      status = pd.Series(float('nan'), index=frame.index, dtype=object)
      for s in sweeps:
        status[sweep_rows(frame, s)] = s[STATUS]
      frame = frame.assign(**{STATUS: status})
  except RecordsError as e:
    raise RecordsError(f'cannot write the records of {paper_key}: {e}') from None
  data = encode(frame, os.path.basename(records_path))
  stated = {'rows': len(frame), 'sha256': hashlib.sha256(data).hexdigest()}
  text = json.dumps({'records': stated, 'sweeps': list(sweeps)}, indent=1, sort_keys=True)
  try:
    os.makedirs(records_dir, exist_ok=True)
    workdir.write_files({records_path: data, manifest_path: text + '\n'})
  except OSError as e:
    raise RecordsError(
      f'cannot write the records of {paper_key} to {records_dir}: '
      f'{e.strerror or e} [errno {e.errno}]; the previous records and manifest are kept'
    ) from None


def _refuse(path: str, what: str, restore: bool = True):
  """Raise the one-line RecordsError, without the exception being handled (if any)."""
  raise RecordsError(f'{path}: {what}' + (f'; {RESTORE}' if restore else '')) from None


def _short(e: BaseException) -> str:
  return ' '.join(str(e).split())[:200] or type(e).__name__


def _is_int(x) -> bool:
  return isinstance(x, int) and not isinstance(x, bool)


def _load_manifest(path: str) -> dict:
  try:
    with open(path, 'rb') as f:
      manifest = json.loads(f.read().decode())
  except (OSError, UnicodeDecodeError, ValueError) as e:
    _refuse(path, f'not a readable JSON manifest ({_short(e)})')
  if not isinstance(manifest, dict) or not isinstance(manifest.get('sweeps'), list):
    _refuse(path, 'not a records manifest (no "sweeps" list)')
  stated = manifest.get('records')
  if not isinstance(stated, dict) or not (
    _is_int(stated.get('rows')) and isinstance(stated.get('sha256'), str)
  ):
    what = 'the manifest states no row count and digest of its records'
    _refuse(path, what + ' ("records": {"rows", "sha256"})')
  for i, s in enumerate(manifest['sweeps']):
    if isinstance(s, dict) and 'fingerprint' in s and 'identity' not in s:
      _refuse(path, f'written before runs had identities (sweep {i} has a fingerprint)')
    missing = [k for k in SWEEP_FIELDS if not isinstance(s, dict) or k not in s]
    if missing:
      _refuse(path, f'sweep {i} lacks {", ".join(missing)}')
    ints = [s['runs'], s['steps'], *s['seeds']] if isinstance(s['seeds'], list) else [None]
    if (
      not isinstance(s['identity'], str) or s['phase'] not in PHASES or not all(map(_is_int, ints))
    ):
      _refuse(path, f'sweep {i} has an invalid phase, runs, steps or seeds')
  return manifest


def _load_records(path: str) -> tuple[pd.DataFrame, bytes]:
  try:
    with open(path, 'rb') as f:
      data = f.read()
    text = gzip.decompress(data)
  except (OSError, EOFError, zlib.error) as e:
    _refuse(path, f'not a whole gzip file ({_short(e)})')
  try:
    frame = pd.read_csv(io.BytesIO(text))
  except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
    _refuse(path, f'not a readable CSV ({_short(e)})')
  missing = [c for c in COLUMNS if c not in frame.columns]
  extra = [str(c) for c in frame.columns if c not in [*COLUMNS, STATUS]]
  what = [f'{k} column {", ".join(v)}' for k, v in (('missing', missing), ('unknown', extra)) if v]
  if what:
    _refuse(path, '; '.join(what))
  for column in COLUMNS:
    values = frame[column]
    if column in TEXT_COLUMNS:
      kind, bad = 'text', values.isna()
    else:
      number = pd.to_numeric(values, errors='coerce')
      bad = number.isna() & values.notna()  # a metric may be NaN (a diverged run), not text
      kind = 'a number'
      if column in INT_COLUMNS:
        kind, bad = 'an integer', bad | number.isna() | (number != number.round())
      frame[column] = number.astype('int64' if column in INT_COLUMNS and not bad.any() else float)
    _refuse_row(path, column, bad, values, kind)
  return frame, data


def _refuse_row(path, column, bad, values, kind) -> None:
  if bad.any():
    i = int(bad.to_numpy().nonzero()[0][0])
    _refuse(path, f'row {i + 1} column {column} holds {values.iloc[i]!r}, not {kind}')


def _check_sweeps(path: str, frame: pd.DataFrame, sweeps: Sequence[Mapping]) -> None:
  covered = pd.Series(False, index=frame.index)
  ends = last_rows(frame)
  for s in sweeps:
    rows = sweep_rows(frame, s)
    mine, where = frame[rows], f'sweep {label(s)}'
    covered |= rows
    seeds, listed = {int(x) for x in mine.seed}, set(s['seeds'])
    lost, more = sorted(listed - seeds), sorted(seeds - listed)
    what = [f'missing {len(lost)} of its {len(listed)} seeds {lost}'] * bool(lost)
    what += [f'seeds {more} the manifest does not list'] * bool(more)
    if what:
      _refuse(path, f'{where}: the records have {" and ".join(what)}', restore=False)
    last = ends[sweep_rows(ends, s)]
    short = last[(last.step != s['steps']) & ~diverged(last)]
    if len(short):
      first, end = short.iloc[0], s['steps']
      what = f'the run of seed {first.seed} ends at step {first.step}, before its last step {end}'
      _refuse(path, f'{where}: {what} (its last evaluation is missing)')
    runs = len(set(zip(mine.setting, mine.seed)))
    if runs != s['runs']:
      what = f'the records hold {runs} runs where the manifest lists {s["runs"]}'
      _refuse(path, f'{where}: {what}', restore=False)
    if not s['identity'].startswith(LEGACY) and sweep_identity(mine[RUN]) != s['identity']:
      _refuse(path, f'{where}: its rows are of other runs than its identity {s["identity"]} says')
    if STATUS in frame.columns and (wrong := mine[STATUS] != s[STATUS]).any():
      say = f'{int(wrong.sum())} of its rows say {mine[STATUS][wrong].iloc[0]!r}'
      _refuse(path, f'{where} is {s[STATUS]!r} in the manifest but {say}')
  if not covered.all():
    f = frame[~covered].iloc[0]
    first = f'(first: {f.experiment}/{f.method}/{f.phase})'
    _refuse(path, f'{int((~covered).sum())} rows belong to no sweep of the manifest {first}')
  if frame.duplicated(KEYS).any():
    _refuse(path, f'{int(frame.duplicated(KEYS).sum())} duplicate rows (same run and step)')


def read(paper_key: str, records_dir: str = RECORDS) -> tuple[pd.DataFrame, list[dict]]:
  """A paper's records and sweeps, checked (RecordsError: one line); empty without both."""
  records_path, manifest_path = paths(paper_key, records_dir)
  have_records, have_manifest = os.path.lexists(records_path), os.path.lexists(manifest_path)
  empty = pd.DataFrame(columns=COLUMNS), []
  if not have_records and not have_manifest:
    return empty
  if not have_manifest:
    _refuse(records_path, f'the records have no manifest ({manifest_path})')
  manifest = _load_manifest(manifest_path)
  stated, sweeps = manifest['records'], manifest['sweeps']
  if not have_records:
    if stated['rows'] or sweeps:
      lists = f'{len(sweeps)} sweeps and {stated["rows"]} rows'
      _refuse(records_path, f'missing, while the manifest lists {lists}')
    return empty
  frame, data = _load_records(records_path)
  if STATUS in frame.columns:
    bad = frame[STATUS].isna() | ~frame[STATUS].isin(STATUSES)
    _refuse_row(records_path, STATUS, bad, frame[STATUS], f'one of {", ".join(STATUSES)}')
    try:
      if not marked(sweeps) and sweeps:
        raise RecordsError('its sweeps state no status')
    except RecordsError as e:
      _refuse(manifest_path, f'the records have a {STATUS} column but {e}')
  else:  # unmarked (written before the column existed): a status in the manifest is ignored
    sweeps = [{k: v for k, v in s.items() if k != STATUS} for s in sweeps]
  _check_sweeps(records_path, frame, sweeps)
  if len(frame) != stated['rows']:
    _refuse(records_path, f'{len(frame)} rows where the manifest lists {stated["rows"]}')
  if hashlib.sha256(data).hexdigest() != stated['sha256']:
    what = f'its SHA-256 differs from the one in {manifest_path}'
    _refuse(records_path, f'{what} (the two files are from different writes)')
  return frame, sweeps
