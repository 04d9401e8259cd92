"""Schedule builders: the delay models of the papers, computed up front in NumPy.

* :func:`synchronous` — cohorts of S clients per round (FedAvg); a round lasts as
  long as its slowest member.
* :func:`fedbuff` — FedBuff's event clock (Nguyen et al., 2022): ``concurrency``
  clients train at once; each finished job enters a buffer; every ``buffer_size``
  arrivals the server steps; a finished client is replaced at once by a uniformly
  drawn idle client that starts from the current version. With a staleness bound it
  is Port's clock (:mod:`afl_jax.schedules.port_clock`).
* :func:`fully_async` — the event clock with a buffer of one (FedAsync, FedFa).
* :func:`random_staleness` — each participant starts from a version drawn
  uniformly from the last ``window`` versions, with local steps drawn per arrival
  (FedGM, Sun et al., App. H.1).
* :func:`waiting_windows` — the server waits a fixed time per round and takes
  whoever finished (AsynFL's flexible participation, Yang et al., Sec. VI).

All builders take a ``seed`` and are deterministic given it. Their staleness, in the
:class:`Schedule` convention ``tau = t - start_step`` (``Schedule.stats(counter=...)``
gives a paper's own counter): :func:`synchronous` 0; :func:`fedbuff` the server steps
applied while the job trained (``<= staleness_bound`` B when given; with constant
durations and buffer 1, ``concurrency - 1`` once every client has reported);
:func:`random_staleness` uniform on ``{0, ..., window - 1}`` (``max_staleness``),
cut at ``t``; :func:`waiting_windows` ``t`` minus the step after the client's previous
report (0 for a client that reports every step; always 0 with ``window=None``).
Tested in tests/theory_test.py.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from afl_jax.schedules.durations import Durations, make
from afl_jax.schedules.schedule import Schedule


def _positive_int(name: str, value, minimum: int = 1) -> int:
  if int(value) != value or value < minimum:
    raise ValueError(f'{name} must be an integer >= {minimum}; got {value!r}.')
  return int(value)


def _steps_table(local_steps, num_clients: int) -> np.ndarray:
  """Per-client local step counts int32[N] from an int or an array [N]."""
  arr = np.asarray(local_steps)
  if arr.ndim == 0:
    arr = np.full(num_clients, int(arr))
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
  t = len(rows)
  m = max(1, max((len(r) for r in rows), default=1))
  ids = np.zeros((t, m), np.int32)
  start = np.zeros((t, m), np.int32)
  steps = np.ones((t, m), np.int32)
  mask = np.zeros((t, m), bool)
  for i, row in enumerate(rows):
    for j, (c, s, k) in enumerate(row):
      ids[i, j], start[i, j], steps[i, j], mask[i, j] = c, s, k, True
  return Schedule(ids, start, steps, mask, np.asarray(wall, np.float64), num_clients)


def _cohorts(num_clients, clients_per_step, num_steps, local_steps, seed):
  """The cohort models' setup: ``(n, t_max, steps int32[N], rng, ids int32[T, S])``, S of
  the N clients drawn without replacement at every step."""
  n = _positive_int('num_clients', num_clients)
  s = _positive_int('clients_per_step', clients_per_step)
  t_max = _positive_int('num_steps', num_steps)
  if s > n:
    raise ValueError(f'clients_per_step={s} exceeds num_clients={n}.')
  steps = _steps_table(local_steps, n)
  rng = np.random.default_rng(seed)
  ids = np.stack([rng.choice(n, size=s, replace=False) for _ in range(t_max)]).astype(np.int32)
  return n, t_max, steps, rng, ids


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


class _IdlePool:
  """Uniform sampling and O(1) removal from a set of client ids."""

  def __init__(self, ids: np.ndarray):
    self.items = list(int(i) for i in ids)
    self.where = {c: k for k, c in enumerate(self.items)}

  def add(self, c: int) -> None:
    self.where[c] = len(self.items)
    self.items.append(c)

  def remove(self, c: int) -> None:
    k = self.where.pop(c)
    last = self.items.pop()
    if last != c:
      self.items[k] = last
      self.where[last] = k

  def draw(self, rng: np.random.Generator) -> int:
    c = self.items[int(rng.integers(len(self.items)))]
    self.remove(c)
    return c


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
  """FedBuff's event clock (Nguyen et al., 2022), optionally with Port's staleness bound B.

  At time 0, ``concurrency`` clients drawn without replacement start from version 0.
  Jobs finish in order of simulated time; a finished job joins the buffer and its
  client is replaced by one drawn uniformly from the idle clients (neither training
  nor waiting in the current buffer), which starts from the current version. The
  ``buffer_size``-th arrival triggers server step t (its wall-clock is that arrival's
  time); clients that start afterwards start from version t + 1.

  With ``staleness_bound`` B, jobs still training from a version ``s < t + 1 - B``
  when the buffer is full are waited for or, ``urgent``, cut short
  (:mod:`afl_jax.schedules.port_clock`, which documents Port's rule).

  Args:
    num_clients: N.
    concurrency: Mc, clients training at any time.
    buffer_size: M, arrivals per server step (1 = fully asynchronous; Port's minimum).
    num_steps: T server steps to simulate.
    staleness_bound: B (an integer >= 0), or None for FedBuff's clock (no bound).
    urgent: Port-Urgent (cut stale jobs short) instead of Port-Non-Urgent (wait).
    durations: job-duration model (default U(0, 20) as in the MasFL experiments).
    local_steps: K per job, an int or per-client array [N].
    seed: seed of the NumPy generator.
  """
  n = _positive_int('num_clients', num_clients)
  mc = _positive_int('concurrency', concurrency)
  m = _positive_int('buffer_size', buffer_size)
  if staleness_bound is not None:
    staleness_bound = _positive_int('staleness_bound', staleness_bound, minimum=0)
  t_max = _positive_int('num_steps', num_steps)
  if mc > n:
    raise ValueError(f'concurrency={mc} exceeds num_clients={n}.')
  if m > mc:
    raise ValueError(
      f'buffer_size={m} exceeds concurrency={mc}; a buffer cannot fill with fewer clients training.'
    )
  if n < mc + m - 1:
    raise ValueError(
      f'num_clients={n} must be >= concurrency + buffer_size - 1 = '
      f'{mc + m - 1} so an idle client is always available.'
    )
  durations = durations or make('uniform', low=0.0, high=20.0)
  steps = _steps_table(local_steps, n)
  rng = np.random.default_rng(seed)
  first = rng.choice(n, size=mc, replace=False)
  pool = _IdlePool(np.setdiff1d(np.arange(n), first))
  # heap entries: (finish time, seq, client, start version, start time)
  heap: list[tuple[float, int, int, int, float]] = []
  for seq, (c, d) in enumerate(zip(first, durations.draw(rng, first), strict=True)):
    heapq.heappush(heap, (float(d), seq, int(c), 0, 0.0))
  seq = mc

  def start_job(c: int, version: int, now: float) -> None:
    nonlocal seq
    d = float(durations.draw(rng, np.array([c]))[0])
    heapq.heappush(heap, (now + d, seq, c, version, now))
    seq += 1

  rows, wall, buffer = [], [], []
  version = 0
  while version < t_max:
    now, _, c, s, _ = heapq.heappop(heap)
    buffer.append((c, s, int(steps[c])))
    if len(buffer) < m:
      start_job(pool.draw(rng), version, now)  # a finished client is replaced at once
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
    for b, _, _ in buffer:
      pool.add(b)
    buffer = []
    while len(heap) < mc:  # refill to Mc clients training, from the new version
      start_job(pool.draw(rng), version, now)
  return _pack(rows, wall, n)


def fully_async(num_clients: int, concurrency: int, num_steps: int, **kwargs) -> Schedule:
  """The event clock with buffer size 1: the server steps at every arrival."""
  return fedbuff(num_clients, concurrency, 1, num_steps, **kwargs)


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
  """FedGM App. H.1: each participant starts from one of the last ``window`` versions.

  Each step draws S clients without replacement; each starts from a version drawn
  uniformly from ``{max(0, t - window + 1), ..., t}``: staleness ``tau <= window - 1``
  (App. H.1's "last 5 or 10 versions"; default window 5). ``max_staleness=tau`` is the
  same with ``window = tau + 1``: staleness uniform on ``{0, ..., tau}`` (give one of
  the two). If ``local_steps_multipliers`` is given (e.g. epochs ``range(1, 7)``), each
  arrival's local steps are ``local_steps[i] * e`` with ``e`` drawn uniformly from it
  (``local_steps`` is then the steps of one epoch, per client). Wall-clock is the step
  index.
  """
  if window is not None and max_staleness is not None:
    raise ValueError(
      f'give window={window} (the last W versions) or max_staleness={max_staleness} '
      '(staleness <= tau), not both.'
    )
  if max_staleness is not None:
    w = _positive_int('max_staleness', max_staleness, minimum=0) + 1
  else:
    w = _positive_int('window', 5 if window is None else window)
  n, t_max, steps, rng, ids = _cohorts(num_clients, clients_per_step, num_steps, local_steps, seed)
  t = np.arange(t_max)[:, None]
  lag = rng.integers(0, w, size=ids.shape)
  start = np.maximum(t - lag, 0)
  k = steps[ids]
  if local_steps_multipliers is not None:
    mult = np.asarray(list(local_steps_multipliers))
    if mult.ndim != 1 or mult.size == 0 or (mult < 1).any():
      raise ValueError(
        'local_steps_multipliers must be a non-empty list of integers >= 1; '
        f'got {local_steps_multipliers!r}.'
      )
    k = k * rng.choice(mult, size=ids.shape)
  return Schedule(ids, start, k, np.ones_like(ids, bool), np.arange(t_max, dtype=np.float64), n)


def waiting_windows(
  num_clients: int,
  num_steps: int,
  *,
  window: float | None,
  durations: Durations,
  local_steps=1,
  seed: int = 0,
) -> Schedule:
  """Flexible participation: the server waits ``window`` seconds per round (AsynFL).

  Every client starts a job from version 0 at time 0. Round t ends at time
  ``(t + 1) * window``; the clients whose current job has finished by then report
  at step t (|S_t| varies, carried by the mask) and start a new job from version
  t + 1 at that moment. Clients still training keep going. ``window=None`` is the
  synchronous limit: each round waits for every client (its length is the slowest
  job), so all N report every step with staleness 0.
  """
  n = _positive_int('num_clients', num_clients)
  t_max = _positive_int('num_steps', num_steps)
  if window is not None and not window > 0:
    raise ValueError(f'window must be > 0 seconds (or None for synchronous); got {window}.')
  steps = _steps_table(local_steps, n)
  rng = np.random.default_rng(seed)
  all_ids = np.arange(n)
  finish = durations.draw(rng, all_ids)
  start = np.zeros(n, np.int64)
  rows, wall = [], []
  now = 0.0
  for t in range(t_max):
    now = float(finish.max()) if window is None else now + window
    ready = np.flatnonzero(finish <= now)
    rows.append([(int(c), int(start[c]), int(steps[c])) for c in ready])
    wall.append(now)
    start[ready] = t + 1
    finish[ready] = now + durations.draw(rng, ready)
  return _pack(rows, wall, n)
