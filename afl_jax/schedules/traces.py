"""The schedule kind ``trace``: per-client speeds, recorded jobs or a recorded ``schedule.npz``
(docs/extending.md); size-checked before reading, never unpickled."""

from __future__ import annotations

import csv
import os
import zipfile
from typing import Any

import numpy as np

from afl_jax.errors import ConfigError
from afl_jax.schedules import builders
from afl_jax.schedules.durations import Durations
from afl_jax.schedules.schedule import Schedule, ScheduleError, load

MAX_BYTES = 1 << 30  # a trace file (an npz: its arrays uncompressed) of at most 1 GiB
SPEEDS = ('duration',)
JOBS = ('client', 'start', 'finish')


def _bad(field: str, value: Any, why: str) -> ConfigError:
  return ConfigError.invalid(f'schedule.{field}', value, why.rstrip('.') + '.')


def read(path: Any) -> dict[str, np.ndarray]:
  if not isinstance(path, str) or not path:
    raise _bad('trace', path, "schedule.kind='trace' needs the path of a .csv or .npz file")
  if not os.path.isfile(path):
    raise _bad('trace', path, f'no such file (relative to {os.getcwd()})')
  if not path.endswith(('.csv', '.npz')):
    raise _bad('trace', path, 'must be a .csv (with a header line) or an .npz file')
  try:
    if path.endswith('.npz'):
      with zipfile.ZipFile(path) as z:
        size = sum(info.file_size for info in z.infolist())
    else:
      size = os.path.getsize(path)
  except (zipfile.BadZipFile, OSError) as e:
    kind = 'it as an npz archive' if path.endswith('.npz') else 'its size'
    raise _bad('trace', path, f'cannot read {kind}: {e}') from None
  if size > MAX_BYTES:
    raise _bad('trace', path, f'the file holds {size:,} bytes, more than {MAX_BYTES:,}')
  try:
    if path.endswith('.npz'):
      with np.load(path, allow_pickle=False) as f:
        columns = {k: np.asarray(f[k]) for k in f.files}
    else:
      with open(path, newline='') as f:
        rows = list(csv.reader(f))
      if not rows:
        raise ValueError('the file is empty')
      header, body = [h.strip() for h in rows[0]], [r for r in rows[1:] if r]
      twice = sorted({h for h in header if header.count(h) > 1})
      if twice:
        raise ValueError(f'column {twice[0]!r} appears twice in the header')
      if any(len(r) != len(header) for r in body):
        raise ValueError(f'every row must have the {len(header)} columns of {header}')
      columns = {h: np.asarray([r[i] for r in body], np.float64) for i, h in enumerate(header)}
    for k, v in columns.items():
      if v.ndim != 1 or v.dtype.kind not in 'iuf':
        raise ValueError(f'column {k!r} must be 1-D numbers; got {v.dtype} of shape {v.shape}')
    columns = {k: v.astype(np.float64) for k, v in columns.items()}
  except (OSError, ValueError, zipfile.BadZipFile) as e:
    raise _bad('trace', path, f'cannot read it: {e}') from None
  lengths = {len(v) for v in columns.values()}
  if len(lengths) > 1:
    raise _bad('trace', path, f'its columns have different lengths {sorted(lengths)}')
  for k, v in columns.items():
    if not np.isfinite(v).all():
      row = int(np.flatnonzero(~np.isfinite(v))[0])
      raise _bad('trace', path, f'column {k!r} holds a non-finite value at row {row}')
  return columns


def _clients(path: str, ids: np.ndarray, n: int) -> np.ndarray:
  bad = (ids != np.round(ids)) | (ids < 0) | (ids >= n)
  if bad.any():
    i = int(np.flatnonzero(bad)[0])
    raise _bad('trace', path, f'row {i}: client {ids[i]:g} is not an id in [0, {n}) (num_clients)')
  return ids.astype(np.int64)


def _speeds(path: str, columns: dict[str, np.ndarray], n: int) -> np.ndarray:
  d = columns['duration']
  if 'client' in columns:
    ids = _clients(path, columns['client'], n)
    if len(ids) != n or len(np.unique(ids)) != n:
      raise _bad('trace', path, f'must list each of the {n} clients once (num_clients={n})')
    d = d[np.argsort(ids)]
  if len(d) != n:
    raise _bad('trace', path, f'holds {len(d)} per-client durations for num_clients={n}')
  if not (d > 0).all():
    raise _bad('trace', path, f'client {int(np.flatnonzero(d <= 0)[0])} has a duration <= 0')
  return d


def _from_jobs(client, start, finish, *, num_clients, buffer_size, num_steps, local_steps):
  """The [T, M] schedule of recorded jobs, ``M = buffer_size``."""
  if (finish < start).any():
    i = int(np.flatnonzero(finish < start)[0])
    raise ValueError(f'row {i}: the job finishes at {finish[i]:g}, before its start {start[i]:g}')
  by = np.lexsort((finish, start, client))  # each client's jobs in start order
  c, s, f = client[by], start[by], finish[by]
  both = (c[1:] == c[:-1]) & ((s[1:] < f[:-1]) | (s[1:] == s[:-1]))
  if both.any():
    k = int(np.flatnonzero(both)[0])
    i, j = sorted((int(by[k]), int(by[k + 1])))
    raise ValueError(
      f'rows {i} and {j}: client {c[k]:g} runs two jobs at once ([{s[k]:g}, {f[k]:g}] and '
      f'[{s[k + 1]:g}, {f[k + 1]:g}]); a client trains one job at a time'
    )
  m, t = buffer_size, num_steps
  if len(client) < t * m:
    raise ValueError(
      f'it holds {len(client)} jobs: {len(client) // m} server steps of buffer_size={m}, '
      f'fewer than num_rounds={t} (needs {t * m} jobs)'
    )
  order = np.argsort(finish, kind='stable')[: t * m].reshape(t, m)
  wall, ids = finish[order[:, -1]], client[order]
  version = np.minimum(np.searchsorted(wall, start[order], side='right'), np.arange(t)[:, None])
  steps = np.asarray(local_steps)[ids]
  return Schedule(ids, version, steps, np.ones((t, m), bool), wall, num_clients)


def _recorded(path: str) -> bool:
  try:
    with zipfile.ZipFile(path) as z:
      return 'client_ids.npy' in z.namelist()
  except (zipfile.BadZipFile, OSError):
    return False  # read() names the problem


def _replay(ctx: Any, durations: Durations, path: str, buffer_size: int) -> Schedule:
  """The recorded schedule ``path``, its first ``ctx.num_steps`` steps as written."""
  if durations.speed is not None:
    raise _bad('client_speed', 'set', "must be 'none' with a recorded schedule")
  try:
    s = load(path)
  except ScheduleError as e:
    raise _bad('trace', path, str(e).removeprefix(f'{path}: ')) from None
  n, t = ctx.num_clients, ctx.num_steps
  if s.num_clients != n:
    raise _bad('trace', path, f'records a schedule of {s.num_clients} clients; num_clients={n}')
  if s.num_steps < t:
    raise _bad('trace', path, f'records {s.num_steps} server steps, fewer than num_rounds={t}')
  if s.max_arrivals != buffer_size:
    why = f'must be {s.max_arrivals}, the arrival slots per step of the recorded schedule {path}'
    raise _bad('buffer_size', buffer_size, why)
  k = np.asarray(ctx.local_steps)[np.where(s.mask, s.client_ids, 0)]
  off = s.mask & (s.local_steps % k != 0)
  if off.any():
    at, j = (int(i) for i in np.argwhere(off)[0])
    raise _bad(
      'trace',
      path,
      f'step {at}, slot {j}: client {s.client_ids[at, j]} ran K={s.local_steps[at, j]} local '
      f'steps, not a multiple of its K_i={k[at, j]}; set config.local_steps / local_epochs '
      'as the recorded run had them',
    )
  return s if s.num_steps == t else s.truncate(t)


def schedule(
  ctx: Any, durations: Durations, path: str, concurrency: int, buffer_size: int
) -> Schedule:
  if isinstance(path, str) and path.endswith('.npz') and os.path.isfile(path) and _recorded(path):
    return _replay(ctx, durations, path, buffer_size)
  columns, n = read(path), ctx.num_clients
  names = sorted(columns)
  if names in (sorted(SPEEDS), sorted(('client',) + SPEEDS)):
    factor, mc, m = _speeds(path, columns, n), concurrency, buffer_size
    clock = {'num_clients': n, 'concurrency': mc, 'buffer_size': m, 'num_steps': ctx.num_steps}
    refusal = builders.BUILDERS.refusal('fedbuff', clock)  # the clock's ranges, declared there
    if refusal is not None:
      field, value, why = refusal
      if field == 'num_clients':
        field, value, why = 'concurrency', mc, f'with num_clients={n}: num_clients {why}'
      raise _bad(field, value, why)
    speed = factor if durations.speed is None else factor * durations.speed
    timing = Durations(durations.kind, durations.params, speed)
    return builders.fedbuff(
      n, mc, m, ctx.num_steps, durations=timing, local_steps=ctx.local_steps, seed=ctx.seed
    )
  if names == sorted(JOBS):
    if durations.speed is not None:
      raise _bad('client_speed', 'set', "must be 'none' with a trace of recorded jobs")
    try:
      ids = _clients(path, columns['client'], n)
      return _from_jobs(
        ids, columns['start'], columns['finish'], num_clients=n, buffer_size=buffer_size,
        num_steps=ctx.num_steps, local_steps=ctx.local_steps,
      )  # fmt: skip
    except (ScheduleError, ValueError) as e:
      raise _bad('trace', path, str(e)) from None
  why = f'has columns {names}; a trace holds per-client speeds {list(SPEEDS)} (optionally with '
  raise _bad('trace', path, why + f'client) or recorded jobs {list(JOBS)}')
