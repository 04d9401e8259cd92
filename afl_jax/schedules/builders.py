"""The papers' delay models in NumPy, deterministic given ``seed``: synchronous cohorts, FedBuff's
event clock (Port's with a staleness bound), FedGM App. H.1, AsynFL Sec. VI (docs/theory.md)."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence

import numpy as np

from afl_jax import checks
from afl_jax.registry import Registry
from afl_jax.schedules.durations import Durations, make
from afl_jax.schedules.schedule import Schedule

SETTINGS = {
  'concurrency': checks.integer(1, 'num_clients'),  # Mc, jobs running at once
  'buffer_size': checks.integer(1, 'concurrency'),  # M, arrivals per server step
  'clients_per_step': checks.integer(1, 'num_clients'),
  'window': checks.integer(1),  # versions a random_staleness start is drawn from
  'num_steps': checks.integer(1),
  'local_steps': checks.ANY,  # an int, or an array [N] of each client's K
}
BUILDERS = Registry('schedule builder', shared=SETTINGS)


def clock_problem(num_clients: int, concurrency: int, buffer_size: int) -> str | None:
  """FedBuff's clock keeps ``concurrency`` jobs running and draws a replacement from the idle
  clients while ``buffer_size - 1`` finished ones wait: the clients it needs."""
  least = concurrency + buffer_size - 1
  why = f'must be >= concurrency + buffer_size - 1 = {least} (an idle client to draw)'
  return why if num_clients < least else None


def _steps_table(local_steps, num_clients: int) -> np.ndarray:
  arr = np.asarray(local_steps)
  arr = np.full(num_clients, int(arr)) if arr.ndim == 0 else arr
  if arr.shape != (num_clients,):
    raise ValueError(
      f'local_steps must be an int or an array of shape ({num_clients},); got shape {arr.shape}.'
    )
  if (arr < 1).any():
    raise ValueError(f'local_steps must be >= 1; got min {arr.min()}.')
  return arr.astype(np.int32)


def _pack(
  rows: Sequence[Sequence[tuple[int, int, int]]], wall: Sequence[float], num_clients: int
) -> Schedule:
  """Rows of (client, start_step, local_steps) per server step -> padded Schedule."""
  grid = np.zeros((len(rows), max([1, *map(len, rows)]), 3), np.int32)
  grid[..., 2] = 1  # padding: client 0 from version 0, one step
  mask = np.zeros(grid.shape[:2], bool)
  for i, row in enumerate(rows):
    grid[i, : len(row)], mask[i, : len(row)] = np.reshape(row, (-1, 3)), True
  return Schedule(*np.moveaxis(grid, 2, 0), mask, np.asarray(wall, np.float64), num_clients)


def _cohorts(num_clients, clients_per_step, num_steps, local_steps, seed):
  """``(n, t_max, steps, rng, ids int32[T, S])``, S of N clients drawn per step."""
  rng = np.random.default_rng(seed)
  ids = [rng.choice(num_clients, size=clients_per_step, replace=False) for _ in range(num_steps)]
  steps = _steps_table(local_steps, num_clients)
  return num_clients, num_steps, steps, rng, np.stack(ids).astype(np.int32)


@BUILDERS.register('synchronous')
def synchronous(
  num_clients: int,
  clients_per_step: int,
  num_steps: int,
  *,
  durations: Durations | None = None,
  local_steps=1,
  seed: int = 0,
) -> Schedule:
  """Synchronous rounds: S clients drawn without replacement, all from the current model."""
  durations = durations or make('constant', value=1.0)
  n, t_max, steps, rng, ids = _cohorts(num_clients, clients_per_step, num_steps, local_steps, seed)
  round_time = durations.draw(rng, ids).max(axis=1)
  start = np.broadcast_to(np.arange(t_max, dtype=np.int32)[:, None], ids.shape)
  return Schedule(ids, start, steps[ids], np.ones_like(ids, bool), np.cumsum(round_time), n)


def _draw(pool: list[int], rng: np.random.Generator) -> int:
  k = int(rng.integers(len(pool)))
  c, pool[k] = pool[k], pool[-1]
  pool.pop()
  return c


CLOCK = checks.Rule('num_clients', clock_problem)


@BUILDERS.register('fedbuff', staleness_bound=checks.integer(0), rules=(CLOCK,))
def fedbuff(
  num_clients: int,
  concurrency: int,
  buffer_size: int,
  num_steps: int,
  *,
  staleness_bound: int | None = None,
  urgent: bool = False,
  durations: Durations | None = None,
  local_steps=1,
  seed: int = 0,
) -> Schedule:
  """FedBuff's event clock: Mc = ``concurrency`` jobs running, each finished one replaced by an idle
  client drawn uniformly; the M-th (``buffer_size``) arrival triggers a step. With B =
  ``staleness_bound``, jobs older than B are waited for or, ``urgent``, cut short
  (docs/algorithms/port.md). Durations default to U(0, 20)."""
  n, mc, m, t_max = num_clients, concurrency, buffer_size, num_steps
  durations = durations or make('uniform', low=0.0, high=20.0)
  steps = _steps_table(local_steps, n)
  rng = np.random.default_rng(seed)
  first = rng.choice(n, size=mc, replace=False)
  pool = [int(i) for i in np.setdiff1d(np.arange(n), first)]
  # heap entries: (finish time, seq, client, start version, start time)
  heap: list[tuple[float, int, int, int, float]] = []
  for i, (c, d) in enumerate(zip(first, durations.draw(rng, first), strict=True)):
    heapq.heappush(heap, (float(d), i, int(c), 0, 0.0))
  seq = itertools.count(mc)

  def start_job(c: int, version: int, now: float) -> None:
    d = float(durations.draw(rng, np.array([c]))[0])
    heapq.heappush(heap, (now + d, next(seq), c, version, now))

  rows, wall, buffer, version = [], [], [], 0
  while version < t_max:
    now, _, c, s, _ = heapq.heappop(heap)
    buffer.append((c, s, int(steps[c])))
    if len(buffer) < m:
      start_job(_draw(pool, rng), version, now)  # a finished client is replaced at once
      continue
    too_stale = []
    if staleness_bound is not None:
      too_stale = [j for j in heap if j[3] < version + 1 - staleness_bound]
    if too_stale and not urgent:
      continue  # wait (no new job starts) until every too-stale job has arrived
    for job in too_stale:  # urgent: report now with the steps done so far
      heap.remove(job)
      end, _, cj, sj, t0 = job
      done = (now - t0) / (end - t0) if end > t0 else 1.0
      buffer.append((cj, sj, max(1, math.floor(steps[cj] * done))))
    heapq.heapify(heap)
    rows.append(buffer)
    wall.append(now)
    version += 1
    pool += [b for b, _, _ in buffer]
    buffer = []
    while len(heap) < mc:  # refill to Mc clients training, from the new version
      start_job(_draw(pool, rng), version, now)
  return _pack(rows, wall, n)


fully_async = BUILDERS.register(
  'fully_async',
  BUILDERS.factory('fedbuff'),
  fixed={'buffer_size': 1},
  staleness_bound=checks.integer(0),
  rules=(CLOCK,),
)


@BUILDERS.register(
  'random_staleness',
  local_steps_multipliers=checks.integers(1),
  max_staleness=checks.integer(0),
  rules=(
    checks.Rule(
      'max_staleness',
      lambda window, max_staleness: (
        f'give window={window} (the last W versions) or max_staleness={max_staleness} '
        '(staleness <= tau), not both'
        if window is not None and max_staleness is not None
        else None
      ),
    ),
  ),
)
def random_staleness(
  num_clients: int,
  clients_per_step: int,
  num_steps: int,
  *,
  window: int | None = None,
  max_staleness: int | None = None,
  local_steps=1,
  local_steps_multipliers: Sequence[int] | None = None,
  seed: int = 0,
) -> Schedule:
  """FedGM App. H.1: each arrival starts from a version drawn from the last ``window`` (default 5;
  ``max_staleness=tau`` is ``window = tau + 1``); its K times one of ``local_steps_multipliers``
  when given."""
  w = max_staleness + 1 if max_staleness is not None else (5 if window is None else window)
  n, t_max, steps, rng, ids = _cohorts(num_clients, clients_per_step, num_steps, local_steps, seed)
  start = np.maximum(np.arange(t_max)[:, None] - rng.integers(0, w, size=ids.shape), 0)
  k = steps[ids]
  if local_steps_multipliers is not None:
    k = k * rng.choice(np.asarray(list(local_steps_multipliers)), size=ids.shape)
  return Schedule(ids, start, k, np.ones_like(ids, bool), np.arange(t_max, dtype=np.float64), n)


@BUILDERS.register(
  'waiting_windows', window=checks.real(0.0, low_open=True, note=' seconds (None: synchronous)')
)
def waiting_windows(
  num_clients: int,
  num_steps: int,
  *,
  window: float | None = None,
  durations: Durations,
  local_steps=1,
  seed: int = 0,
) -> Schedule:
  """AsynFL's flexible participation: round t ends at ``(t + 1) window`` seconds; clients finished
  by then report and restart from version t + 1 (``window=None``: synchronous)."""
  n, steps, rng = num_clients, _steps_table(local_steps, num_clients), np.random.default_rng(seed)
  finish, start = durations.draw(rng, np.arange(n)), np.zeros(n, np.int64)
  rows, wall, now = [], [], 0.0
  for t in range(num_steps):
    now = float(finish.max()) if window is None else now + window
    ready = np.flatnonzero(finish <= now)
    rows.append([(int(c), int(start[c]), int(steps[c])) for c in ready])
    wall.append(now)
    start[ready] = t + 1
    finish[ready] = now + durations.draw(rng, ready)
  return _pack(rows, wall, n)
