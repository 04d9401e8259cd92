"""A paper's records and manifest, written together and read only when whole.

The records (``<paper>.csv.gz``, one row per evaluation of a run, its ``run`` column the
run's identity) and the manifest (``<paper>.json``: the sweeps that produced them, the
records' row count and SHA-256) are one pair, replaced together (:func:`write`) and
checked against each other before any row is scored (:func:`read`: a damaged or
mismatched pair is refused in one line naming the file). Each sweep states its status
(``current``: the declaration gives a sweep of its identity now, and the pages score it;
``superseded``), repeated in every row's ``status`` column. What each guarantee means:
docs/reliability.md#result-records.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from afl_jax.errors import UserError
from afl_jax.pipeline import record, workdir
from afl_jax.reproduction import spec

RECORDS = os.path.join(os.path.dirname(spec.CONFIGS), 'docs', 'results', 'records')

KEYS = ['experiment', 'method', 'phase', 'setting', 'seed', 'step']
METRIC_COLUMNS = [
  'wall_clock',
  'bytes_up',
  'val_accuracy',
  'val_loss',
  'test_accuracy',
  'test_loss',
]
RUN = 'run'  # the column of each row's run identity
COLUMNS = KEYS + METRIC_COLUMNS + [RUN]
TEXT_COLUMNS = ['experiment', 'method', 'phase', 'setting', RUN]
INT_COLUMNS = ['seed', 'step']
# A sweep: its key (experiment, method, phase, setting), its identity (the digest of its runs'
# identities), seeds, run count and the step each run ends at.
SWEEP_FIELDS = ('experiment', 'method', 'phase', 'setting', 'identity', 'seeds', 'runs', 'steps')
LEGACY = 'legacy:'  # a sweep from before run identities (superseded): its runs are unknown
PHASES = ('select', 'test')
STATUS = 'status'  # the column (and manifest field) of a sweep's status
STATUSES = ('current', 'superseded')
RESTORE = 'restore both files (git checkout) or rerun the reproduction'


class RecordsError(UserError):
  """Records or a manifest that are damaged or do not match each other."""


def paths(paper_key: str, records_dir: str) -> tuple[str, str]:
  """(records file, manifest file) of ``paper_key``."""
  return (
    os.path.join(records_dir, f'{paper_key}.csv.gz'),
    os.path.join(records_dir, f'{paper_key}.json'),
  )


def encode(frame: pd.DataFrame, name: str) -> bytes:
  """The gzipped CSV of ``frame`` byte for byte as pandas writes it to a file ``name`` (gzip
  header without a timestamp: the same rows give the same bytes)."""
  buf = io.BytesIO()
  buf.name = name  # the gzip header names the file, as for a path
  frame.to_csv(buf, index=False, compression={'method': 'gzip', 'mtime': 0})
  return buf.getvalue()


def digest(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def sweep_identity(run_identities) -> str:
  """A sweep's identity: the digest of its runs' identities (in any order)."""
  return record.digest_of(sorted(set(run_identities)))[:32]


def marked(sweeps: Sequence[Mapping]) -> bool:
  """Whether ``sweeps`` state their status (all of them; none: an unmarked pair).

  Raises:
    RecordsError: some sweeps state one and others do not, or one is not a status.
  """
  have = [STATUS in s for s in sweeps]
  if any(have) and not all(have):
    s = sweeps[have.index(False)]
    raise RecordsError(f'sweep {label(s)} states no status while others do')
  bad = [s for s in sweeps if STATUS in s and s[STATUS] not in STATUSES]
  if bad:
    raise RecordsError(
      f'sweep {label(bad[0])} has status {bad[0][STATUS]!r}, not one of {", ".join(STATUSES)}'
    )
  return bool(sweeps) and all(have)


def sweep_rows(frame: pd.DataFrame, s: Mapping) -> pd.Series:
  """The rows of sweep ``s``: its seeds of its method in its phase (a test sweep is one
  setting; a selection sweep, all). Sweeps of one key on other seeds are others."""
  rows = (frame.experiment == s['experiment']) & (frame.method == s['method'])
  rows &= (frame.phase == s['phase']) & frame.seed.isin(s['seeds'])
  return rows & (frame.setting == s['setting']) if s['phase'] == 'test' else rows


def same_runs(a: Mapping, b: Mapping) -> bool:
  """Whether sweeps ``a`` and ``b`` share a run (same key, a seed in common): a new one
  replaces the old in the records."""
  key = ('experiment', 'method', 'phase', 'setting')
  return all(a[k] == b[k] for k in key) and bool(set(a['seeds']) & set(b['seeds']))


def diverged(last: pd.DataFrame) -> pd.Series:
  """Whether each run diverged, from its last row (:func:`last_rows`): a non-finite test
  score, or validation score where the run has a validation split."""
  test = ~np.isfinite(last[['test_accuracy', 'test_loss']].to_numpy(float)).all(axis=1)
  val = ~np.isfinite(last[['val_accuracy', 'val_loss']].to_numpy(float)).all(axis=1)
  return pd.Series(test | (val & last['has_val'].to_numpy(bool)), index=last.index)


def last_rows(frame: pd.DataFrame) -> pd.DataFrame:
  """The last row of every run, with ``has_val``: its first evaluation has a validation
  score (the run has a validation split)."""
  runs_ = frame.sort_values('step', kind='stable').groupby(KEYS[:-1])
  last = runs_.tail(1).copy()
  last['has_val'] = runs_['val_accuracy'].transform('first').loc[last.index].notna()
  return last


def write(
  paper_key: str, frame: pd.DataFrame, sweeps: Sequence[Mapping], records_dir: str = RECORDS
) -> None:
  """Replace the pair of ``paper_key`` with ``frame`` and ``sweeps``, both sorted (same rows,
  same bytes), each row with its sweep's status when the sweeps state theirs.

  Raises:
    RecordsError: the directory cannot be written (the previous pair is kept); some
      sweeps state a status and others not, or one that is not a status.
  """
  records_path, manifest_path = paths(paper_key, records_dir)
  frame = frame.sort_values(KEYS, kind='stable').reset_index(drop=True)[COLUMNS]
  sweeps = sorted(
    sweeps, key=lambda m: (m['experiment'], m['phase'], m['method'], m['setting'], min(m['seeds']))
  )
  try:
    if marked(sweeps):
      status = pd.Series(float('nan'), index=frame.index, dtype=object)
      for s in sweeps:
        status[sweep_rows(frame, s)] = s[STATUS]
      frame = frame.assign(**{STATUS: status})
  except RecordsError as e:
    raise RecordsError(f'cannot write the records of {paper_key}: {e}') from None
  data = encode(frame, os.path.basename(records_path))
  manifest = {'records': {'rows': len(frame), 'sha256': digest(data)}, 'sweeps': list(sweeps)}
  try:
    os.makedirs(records_dir, exist_ok=True)
    text = json.dumps(manifest, indent=1, sort_keys=True) + '\n'
    workdir.write_files({records_path: data, manifest_path: text})
  except OSError as e:
    raise RecordsError(
      f'cannot write the records of {paper_key} to {records_dir}: '
      f'{e.strerror or e} [errno {e.errno}]; the previous records and manifest are kept'
    ) from None


def _load_manifest(path: str) -> dict[str, Any]:
  try:
    with open(path, 'rb') as f:
      manifest = json.loads(f.read().decode())
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise RecordsError(f'{path}: not a readable JSON manifest ({_short(e)}); {RESTORE}') from None
  if not isinstance(manifest, dict) or not isinstance(manifest.get('sweeps'), list):
    raise RecordsError(f'{path}: not a records manifest (no "sweeps" list); {RESTORE}')
  stated = manifest.get('records')
  if not (
    isinstance(stated, dict)
    and _is_int(stated.get('rows'))
    and isinstance(stated.get('sha256'), str)
  ):
    raise RecordsError(
      f'{path}: the manifest states no row count and digest of its records ("records": '
      '{"rows", "sha256"}); ' + RESTORE
    )
  for i, s in enumerate(manifest['sweeps']):
    if isinstance(s, dict) and 'fingerprint' in s and 'identity' not in s:
      raise RecordsError(
        f'{path}: written before runs had identities (sweep {i} has a fingerprint); {RESTORE}'
      )
    missing = [k for k in SWEEP_FIELDS if not isinstance(s, dict) or k not in s]
    if missing:
      raise RecordsError(f'{path}: sweep {i} lacks {", ".join(missing)}; {RESTORE}')
    if (
      not isinstance(s['identity'], str)
      or s['phase'] not in PHASES
      or not _is_int(s['runs'])
      or not _is_int(s['steps'])
      or not isinstance(s['seeds'], list)
      or not all(_is_int(x) for x in s['seeds'])
    ):
      raise RecordsError(f'{path}: sweep {i} has an invalid phase, runs, steps or seeds; {RESTORE}')
  return manifest


def _is_int(x: Any) -> bool:
  return isinstance(x, int) and not isinstance(x, bool)


def _short(e: BaseException) -> str:
  return ' '.join(str(e).split())[:200] or type(e).__name__


def _load_records(path: str) -> tuple[pd.DataFrame, bytes]:
  try:
    with open(path, 'rb') as f:
      data = f.read()
    text = gzip.decompress(data)
  except (OSError, EOFError, zlib.error) as e:
    raise RecordsError(f'{path}: not a whole gzip file ({_short(e)}); {RESTORE}') from None
  try:
    frame = pd.read_csv(io.BytesIO(text))
  except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
    raise RecordsError(f'{path}: not a readable CSV ({_short(e)}); {RESTORE}') from None
  missing = [c for c in COLUMNS if c not in frame.columns]
  extra = [c for c in frame.columns if c not in [*COLUMNS, STATUS]]
  if missing or extra:
    what = [f'missing column {", ".join(missing)}'] * bool(missing)
    what += [f'unknown column {", ".join(map(str, extra))}'] * bool(extra)
    raise RecordsError(f'{path}: {"; ".join(what)}; {RESTORE}')
  for column in COLUMNS:
    values = frame[column]
    kind = (
      'text' if column in TEXT_COLUMNS else 'an integer' if column in INT_COLUMNS else 'a number'
    )
    if column in TEXT_COLUMNS:
      bad = values.isna()
    else:
      number = pd.to_numeric(values, errors='coerce')
      bad = number.isna() & values.notna()  # a metric may be NaN (a diverged run), not text
      if column in INT_COLUMNS:
        bad |= number.isna() | (number != number.round())
    if bad.any():
      i = int(bad.to_numpy().nonzero()[0][0])
      raise RecordsError(
        f'{path}: row {i + 1} column {column} holds {values.iloc[i]!r}, not {kind}; {RESTORE}'
      )
    if column not in TEXT_COLUMNS:
      frame[column] = pd.to_numeric(values).astype('int64' if column in INT_COLUMNS else float)
  return frame, data


def label(s: Mapping) -> str:
  where = f'{s["experiment"]}/{s["method"]}/{s["phase"]}'
  return where + (f' {s["setting"]}' if s['phase'] == 'test' else '')


def _check_sweeps(path: str, frame: pd.DataFrame, sweeps: Sequence[Mapping]) -> None:
  """Every manifest sweep's rows hold its seeds and runs (and its status, in a marked
  pair); every row belongs to one sweep."""
  covered = pd.Series(False, index=frame.index)
  ends = last_rows(frame)
  for s in sweeps:
    rows = sweep_rows(frame, s)
    mine = frame[rows]
    covered |= rows
    seeds, listed = {int(x) for x in mine.seed}, set(s['seeds'])
    if seeds != listed:
      lost, more = sorted(listed - seeds), sorted(seeds - listed)
      what = [f'missing {len(lost)} of its {len(listed)} seeds {lost}'] * bool(lost)
      what += [f'seeds {more} the manifest does not list'] * bool(more)
      raise RecordsError(f'{path}: sweep {label(s)}: the records have {" and ".join(what)}')
    runs = len(set(zip(mine.setting, mine.seed)))
    last = ends[sweep_rows(ends, s)]
    short = last[(last.step != s['steps']) & ~diverged(last)]
    if len(short):
      first = short.iloc[0]
      raise RecordsError(
        f'{path}: sweep {label(s)}: the run of seed {first.seed} ends at step {first.step}, '
        f'before its last step {s["steps"]} (its last evaluation is missing); {RESTORE}'
      )
    if runs != s['runs']:
      raise RecordsError(
        f'{path}: sweep {label(s)}: the records hold {runs} runs where the manifest lists '
        f'{s["runs"]}'
      )
    if not s['identity'].startswith(LEGACY) and sweep_identity(mine[RUN]) != s['identity']:
      raise RecordsError(
        f'{path}: sweep {label(s)}: its rows are of other runs than its identity '
        f'{s["identity"]} says; {RESTORE}'
      )
    if STATUS in frame.columns:
      wrong = mine[STATUS] != s[STATUS]
      if wrong.any():
        raise RecordsError(
          f'{path}: sweep {label(s)} is {s[STATUS]!r} in the manifest but {int(wrong.sum())} '
          f'of its rows say {mine[STATUS][wrong].iloc[0]!r}; {RESTORE}'
        )
  if not covered.all():
    first = frame[~covered].iloc[0]
    raise RecordsError(
      f'{path}: {int((~covered).sum())} rows belong to no sweep of the manifest (first: '
      f'{first.experiment}/{first.method}/{first.phase}); {RESTORE}'
    )
  duplicated = frame.duplicated(KEYS)
  if duplicated.any():
    raise RecordsError(
      f'{path}: {int(duplicated.sum())} duplicate rows (same run and step); {RESTORE}'
    )


def read(paper_key: str, records_dir: str = RECORDS) -> tuple[pd.DataFrame, list[dict]]:
  """A paper's records and manifest sweeps, checked against each other; an empty frame and
  no sweeps when neither file exists.

  Raises:
    RecordsError: one line naming the file and what is damaged or differs.
  """
  records_path, manifest_path = paths(paper_key, records_dir)
  have_records, have_manifest = os.path.lexists(records_path), os.path.lexists(manifest_path)
  empty = pd.DataFrame(columns=COLUMNS), []
  if not have_records and not have_manifest:
    return empty
  if not have_manifest:
    raise RecordsError(f'{records_path}: the records have no manifest ({manifest_path}); {RESTORE}')
  manifest = _load_manifest(manifest_path)
  stated = manifest['records']
  if not have_records:
    if stated['rows'] or manifest['sweeps']:
      raise RecordsError(
        f'{records_path}: missing, while the manifest lists {len(manifest["sweeps"])} sweeps '
        f'and {stated["rows"]} rows; {RESTORE}'
      )
    return empty
  frame, data = _load_records(records_path)
  if STATUS in frame.columns:
    bad = frame[STATUS].isna() | ~frame[STATUS].isin(STATUSES)
    if bad.any():
      i = int(bad.to_numpy().nonzero()[0][0])
      raise RecordsError(
        f'{records_path}: row {i + 1} column {STATUS} holds {frame[STATUS].iloc[i]!r}, not '
        f'one of {", ".join(STATUSES)}; {RESTORE}'
      )
    try:
      if not marked(manifest['sweeps']) and manifest['sweeps']:
        raise RecordsError('its sweeps state no status')
    except RecordsError as e:
      raise RecordsError(
        f'{manifest_path}: the records have a {STATUS} column but {e}; {RESTORE}'
      ) from None
  else:  # unmarked (written before the column existed): a status in the manifest is ignored
    manifest['sweeps'] = [{k: v for k, v in s.items() if k != STATUS} for s in manifest['sweeps']]
  _check_sweeps(records_path, frame, manifest['sweeps'])
  if len(frame) != stated['rows']:
    raise RecordsError(
      f'{records_path}: {len(frame)} rows where the manifest lists {stated["rows"]}; {RESTORE}'
    )
  if digest(data) != stated['sha256']:
    raise RecordsError(
      f'{records_path}: its SHA-256 differs from the one in {manifest_path} (the two files '
      f'are from different writes); {RESTORE}'
    )
  return frame, manifest['sweeps']
