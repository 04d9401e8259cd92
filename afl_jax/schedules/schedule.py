"""The precomputed arrival schedule, host NumPy validated on construction (docs/architecture.md):
an arrival at step ``t`` with ``start_step = s`` trained from version ``s``, staleness ``t - s``."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import zipfile
import zlib
from typing import Any

import numpy as np

from afl_jax.errors import UserError

SCHEDULE_FORMAT_VERSION = 1
_ARRAYS = ('client_ids', 'start_step', 'local_steps', 'mask', 'wall_clock', 'num_clients')
_GRID = _ARRAYS[:4]  # the [T, M] arrays
_INDEX_MAX = int(np.iinfo(np.int32).max)  # ids, start steps and local steps are int32
# Arrival slots T x M of a schedule (afl_jax.pipeline.sizes applies it to built ones too).
MAX_SLOTS = 2 * 10**7
# Each paper's delay counter minus ours (tau = t - start_step): docs/theory.md, "Delay counters".
DELAY_COUNTERS = {'afl_jax': 0, 'fedgm': 0, 'masfl': 0, 'fedecho': 0, 'asynfl': 1, 'fedfa': 1,
                  'ca2fl': -1}  # fmt: skip


class ScheduleError(UserError):
  """A malformed schedule; the message names the field, the offending entry and the rule."""


def _reject(bad: np.ndarray, message: str, values: np.ndarray | None = None, **fmt: Any) -> None:
  if bad.any():
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    v = None if values is None else values[at]
    raise ScheduleError(message.format(t=at[0], j=at[-1], v=v, max=_INDEX_MAX, **fmt))


def _count(name: str, value: Any, minimum: int = 1) -> int:
  arr = np.asarray(value)
  x = arr.item() if arr.ndim == 0 else None
  if x is None or arr.dtype == np.bool_ or arr.dtype.kind not in 'iuf':
    raise ScheduleError(f'{name} must be an integer; got {value!r}.')
  if isinstance(x, float) and (not np.isfinite(x) or x != int(x)):
    raise ScheduleError(f'{name} must be an integer; got {value!r} (not cast silently).')
  if not minimum <= int(x) <= _INDEX_MAX:
    raise ScheduleError(f'{name} must be in [{minimum}, {_INDEX_MAX}] (int32); got {x!r}.')
  return int(x)


def _array(name: str, x: Any) -> np.ndarray:
  try:
    return np.asarray(x)
  except (TypeError, ValueError) as e:  # ragged nested lists
    raise ScheduleError(f'{name} must be a rectangular array; got {e}.') from None


@dataclasses.dataclass(frozen=True, eq=False)
class Schedule:
  """Arrays [T, M] ``client_ids``, ``start_step``, ``local_steps`` (K >= 1) and ``mask`` (False =
  padding), ``wall_clock`` [T] and N = ``num_clients`` (None: the largest valid id + 1)."""

  client_ids: np.ndarray
  start_step: np.ndarray
  local_steps: np.ndarray
  mask: np.ndarray
  wall_clock: np.ndarray
  num_clients: int | None

  def __post_init__(self):
    set_ = lambda k, v: object.__setattr__(self, k, v)
    for name in _GRID:
      arr = _array(name, getattr(self, name))
      if arr.ndim != 2:
        raise ScheduleError(f'{name} must be a 2-D array [T, M]; got shape {arr.shape}.')
      if name != 'mask' and not np.issubdtype(arr.dtype, np.integer):
        raise ScheduleError(f'{name} must hold integers; got dtype {arr.dtype} (not cast).')
      shape = arr.shape if name == 'client_ids' else self.client_ids.shape
      if arr.shape != shape:
        raise ScheduleError(f'{name} has shape {arr.shape}, not the same shape as client_ids.')
      set_(name, arr)
    if shape[0] < 1 or shape[1] < 1:
      raise ScheduleError(f'a schedule needs T >= 1 steps and M >= 1 slots; got shape {shape}.')
    if self.mask.dtype != np.bool_:
      if not np.issubdtype(self.mask.dtype, np.integer) or not np.isin(self.mask, (0, 1)).all():
        raise ScheduleError(f'mask must be boolean (or integer 0/1); got dtype {self.mask.dtype}.')
      set_('mask', self.mask.astype(bool))
    m, wall = self.mask, _array('wall_clock', self.wall_clock)
    if wall.dtype == np.bool_ or wall.dtype.kind not in 'iuf':
      raise ScheduleError(f'wall_clock must hold real numbers; got dtype {wall.dtype}.')
    wall = wall.astype(np.float64)
    if wall.shape != (shape[0],):
      raise ScheduleError(f'wall_clock must have shape ({shape[0]},); got {wall.shape}.')
    _reject(~np.isfinite(wall), 'wall_clock must be finite; step {t}.')
    _reject(np.diff(wall) < 0, 'wall_clock must be non-decreasing; it decreases after step {t}.')
    set_('wall_clock', wall)
    if self.num_clients is None:  # from_arrays without num_clients: the largest id + 1
      set_('num_clients', int(self.client_ids[m].max()) + 1 if m.any() else 1)
    n = _count('num_clients', self.num_clients)
    set_('num_clients', n)
    t_index = np.arange(shape[0])[:, None]
    for name, low, high, rule in (
      ('client_ids', 0, n - 1, 'is out of range; ids must be in [0, {n}) (num_clients={n}).'),
      ('start_step', 0, t_index, 'is invalid; an arrival at step t={t} must have 0 <= '
       'start_step <= t.'),
      ('local_steps', 1, _INDEX_MAX, 'is invalid; local steps must be in [1, {max}] (int32).'),
    ):  # fmt: skip
      arr = getattr(self, name)
      _reject(m & ((arr < low) | (arr > high)), f'{name}[{{t}}, {{j}}] = {{v}} {rule}', arr, n=n)
    if shape[0] > _INDEX_MAX:
      raise ScheduleError(f'a schedule has at most {_INDEX_MAX} steps (int32); got {shape[0]}.')
    ids = np.where(m, self.client_ids, 0)
    srt = np.sort(np.where(m, ids, -1 - np.arange(shape[1])[None, :]), axis=1)
    twice = (
      'client {v} arrives twice at step {t}; a client can report at most once per server step.'
    )
    _reject((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0), twice, srt)
    # Canonical padding: ids 0, start = t, one step. Stored as int32.
    set_('client_ids', ids.astype(np.int32))
    set_('start_step', np.where(m, self.start_step, t_index).astype(np.int32))
    set_('local_steps', np.where(m, self.local_steps, 1).astype(np.int32))
    for name in _ARRAYS[:5]:
      getattr(self, name).setflags(write=False)

  num_steps = property(lambda self: int(self.client_ids.shape[0]))
  max_arrivals = property(lambda self: int(self.client_ids.shape[1]))
  staleness = property(  # int32[T, M] tau = t - start_step (0 on padding)
    lambda self: np.where(
      self.mask, np.arange(self.num_steps, dtype=np.int32)[:, None] - self.start_step, 0
    ).astype(np.int32)
  )
  max_staleness = property(lambda self: int(self.staleness.max()))
  avg_staleness = property(lambda self: float(self.staleness.sum() / max(self.mask.sum(), 1)))
  arrivals_per_step = property(lambda self: self.mask.sum(axis=1))
  participation_counts = property(
    lambda self: np.bincount(self.client_ids[self.mask], minlength=self.num_clients)
  )
  max_local_steps = property(
    lambda self: int(self.local_steps[self.mask].max()) if self.mask.any() else 1
  )

  def digest(self) -> str:
    """SHA-256 of the client count and the arrays (dtype, shape, bytes): what a run's identity
    holds of its schedule, and the key of a program whose algorithm reads it."""
    h = hashlib.sha256(str(self.num_clients).encode())
    for name in _ARRAYS[:5]:
      a = np.ascontiguousarray(getattr(self, name))
      h.update(f'{a.dtype.str}{a.shape};'.encode())
      h.update(memoryview(a).cast('B') if a.size else b'')
    return h.hexdigest()

  def stats(self, counter: str = 'afl_jax') -> dict[str, Any]:
    """Summary statistics (JSON), ``tau_max`` and ``tau_avg`` in ``counter``'s convention."""
    if counter not in DELAY_COUNTERS:
      raise ValueError(f'counter must be one of {sorted(DELAY_COUNTERS)}; got {counter!r}.')
    offset, counts = DELAY_COUNTERS[counter], self.participation_counts
    return {
      'num_steps': self.num_steps,
      'max_arrivals': self.max_arrivals,
      'num_clients': self.num_clients,
      'arrivals': int(self.mask.sum()),
      'tau_max': self.max_staleness + offset,
      'tau_avg': self.avg_staleness + offset,
      'participation_min': int(counts.min()),
      'participation_max': int(counts.max()),
      'clients_never_arrived': int((counts == 0).sum()),
      'wall_clock_end': float(self.wall_clock[-1]),
      'max_local_steps': self.max_local_steps,
    }

  def truncate(self, num_steps: int) -> Schedule:
    if not 1 <= num_steps <= self.num_steps:
      raise ScheduleError(f'num_steps must be in [1, {self.num_steps}]; got {num_steps}.')
    return Schedule(*(getattr(self, k)[:num_steps] for k in _ARRAYS[:5]), self.num_clients)

  def save(self, path: str | os.PathLike) -> None:
    """An .npz of plain arrays that :func:`load` replays exactly."""
    arrays = {k: getattr(self, k) for k in _ARRAYS[:5]}
    n = np.int64(self.num_clients)
    np.savez(path, format_version=np.int64(SCHEDULE_FORMAT_VERSION), **arrays, num_clients=n)


def _member_sizes(path: str, max_slots: int) -> None:
  with zipfile.ZipFile(path) as archive:
    for info in archive.infolist():
      name = info.filename.removesuffix('.npy')
      try:
        with archive.open(info) as member:
          version = np.lib.format.read_magic(member)
          if version not in ((1, 0), (2, 0)):
            raise ValueError(f'.npy format version {version} is not read here')
          read = getattr(np.lib.format, f'read_array_header_{version[0]}_0')
          shape, _, dtype = read(member)
      except (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error) as e:
        raise ScheduleError(f'array {name!r} is not a readable .npy array ({e}).') from None
      entries = int(np.prod(shape, dtype=np.float64))
      if entries > max_slots:
        raise ScheduleError(
          f'array {name!r} has shape {tuple(shape)} ({entries:,} entries, '
          f'{entries * dtype.itemsize / 2**20:,.0f} MiB expanded), above the limit of '
          f'{max_slots:,} arrival slots of a schedule; nothing was expanded.'
        )


def load(path: str | os.PathLike, *, max_slots: int = MAX_SLOTS) -> Schedule:
  """A schedule written by :meth:`Schedule.save` (or a trace in that format: ``local_steps``,
  ``mask``, ``wall_clock`` optional); nothing unpickled, nothing expanded beyond ``max_slots``;
  every problem a ScheduleError naming the file."""
  path = os.fspath(path)
  try:
    _member_sizes(path, max_slots)
    with np.load(path, allow_pickle=False) as f:
      arrays = {k: f[k] for k in f.files}
  except ScheduleError as e:
    raise ScheduleError(f'cannot read schedule file {path}: {e}') from None
  except (FileNotFoundError, IsADirectoryError) as e:
    raise ScheduleError(f'cannot read schedule file {path}: {e.strerror.lower()}.') from None
  except zipfile.BadZipFile:
    raise ScheduleError(
      f'cannot read schedule file {path}: not an .npz archive written by Schedule.save.'
    ) from None
  except (OSError, ValueError, EOFError, zlib.error) as e:
    raise ScheduleError(f'cannot read schedule file {path}: {e} (truncated or corrupt?).') from None
  try:  # every error below names the file
    if 'format_version' in arrays:
      version = _count('format_version', arrays.pop('format_version'))
      if version != SCHEDULE_FORMAT_VERSION:
        raise ScheduleError(f'format_version {version} is not supported (only 1 is).')
    for required in ('client_ids', 'start_step', 'num_clients'):
      if required not in arrays:
        raise ScheduleError(f'missing array {required!r}; found {sorted(arrays)}.')
    unknown = sorted(set(arrays) - set(_ARRAYS))
    if unknown:
      raise ScheduleError(f'unknown arrays {unknown}; a schedule holds {list(_ARRAYS)}.')
    return from_arrays(**arrays)
  except ScheduleError as e:
    raise ScheduleError(f'{path}: {e}') from None


def from_arrays(
  client_ids, start_step, local_steps=None, mask=None, wall_clock=None, num_clients=None
) -> Schedule:
  """A schedule from explicit arrays (lists too): 1-D ``[T]`` arrays mean M = 1; ``local_steps``
  may be a scalar (default 1), ``mask`` defaults to all True, ``wall_clock`` to the step index,
  ``num_clients`` to the largest valid id + 1 (pass the problem's N to be exact)."""
  client_ids, start_step = _array('client_ids', client_ids), _array('start_step', start_step)
  if client_ids.ndim == 1:
    client_ids = client_ids[:, None]
  if start_step.ndim == 1 and client_ids.ndim == 2 and client_ids.shape[1] == 1:
    start_step = start_step[:, None]  # a mismatch is refused by Schedule's shape check
  local_steps = _array('local_steps', 1 if local_steps is None else local_steps)
  if local_steps.ndim == 0:
    local_steps = np.full(client_ids.shape, _count('local_steps', local_steps), np.int32)
  mask = np.ones(client_ids.shape, bool) if mask is None else _array('mask', mask)
  t = client_ids.shape[0] if client_ids.ndim else 0
  wall_clock = np.arange(t, dtype=np.float64) if wall_clock is None else wall_clock
  return Schedule(client_ids, start_step, local_steps, mask, wall_clock, num_clients)
