"""Port's bounded-staleness event clock (Su & Li, IWQoS 2022), computed up front.

Port ("How Asynchronous can Federated Learning Be?", IEEE/ACM IWQoS 2022) runs on
FedBuff's event clock (:func:`afl_jax.schedules.builders.fedbuff`: ``concurrency``
clients train at once, the server steps once ``buffer_size`` jobs have finished)
plus a staleness bound B, as the authors' Plato server does it
(``plato/servers/base.py``, ``staleness_bound`` and ``request_update``). Here every
arrival has staleness ``tau = t - s <= B``: when the buffer is full at time ``now``
for step t, a job still training from a version ``s < t + 1 - B`` would arrive
too stale at any later step, and

* ``urgent=False`` (Port-Non-Urgent): the server waits. Jobs keep finishing in time
  order and join the buffer, and no new job starts, until no such job is left; the
  step's wall-clock time is the last finish time, and the step holds more than
  ``buffer_size`` arrivals.
* ``urgent=True`` (Port-Urgent): the server sends such jobs an urgent request and
  they report at ``now`` what they have: ``K' = max(1, floor(K * elapsed /
  duration))`` local steps of the K they were given (the engine runs
  heterogeneous K per arrival).

Before the buffer is full a finished client is replaced at once (FedBuff's clock);
after a step, idle clients drawn uniformly start from the new version until
``concurrency`` are training again.

In a config it is the schedule kind ``port`` (:mod:`afl_jax.schedules.registry`).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from afl_jax.schedules.builders import _IdlePool, _pack, _positive_int, _steps_table
from afl_jax.schedules.durations import Durations, uniform
from afl_jax.schedules.schedule import Schedule


def port_clock(
  num_clients: int,
  concurrency: int,
  buffer_size: int,
  staleness_bound: int,
  num_steps: int,
  *,
  urgent: bool = False,
  durations: Durations | None = None,
  local_steps=1,
  seed: int = 0,
) -> Schedule:
  """FedBuff's event clock with Port's staleness bound (see the module docstring).

  Args:
    num_clients: N.
    concurrency: Mc, clients training at any time.
    buffer_size: M, Port's minimum number of reports per aggregation.
    staleness_bound: B (>= 0, an integer): no arrival is staler than B.
    num_steps: T server steps.
    urgent: Port-Urgent (cut stale jobs short) instead of Port-Non-Urgent (wait).
    durations: job-duration model (default U(0, 20)).
    local_steps: K per job, an int or per-client array [N].
    seed: seed of the NumPy generator.
  """
  n = _positive_int('num_clients', num_clients)
  mc = _positive_int('concurrency', concurrency)
  m = _positive_int('buffer_size', buffer_size)
  bound = _positive_int('staleness_bound', staleness_bound, minimum=0)
  t_max = _positive_int('num_steps', num_steps)
  if m > mc or mc > n or n < mc + m - 1:
    raise ValueError(
      f'need buffer_size <= concurrency <= num_clients and num_clients >= concurrency + '
      f'buffer_size - 1; got M={m}, Mc={mc}, N={n}.'
    )
  durations = durations or uniform(0.0, 20.0)
  steps = _steps_table(local_steps, n)
  rng = np.random.default_rng(seed)
  first = rng.choice(n, size=mc, replace=False)
  pool = _IdlePool(np.setdiff1d(np.arange(n), first))
  # heap entries: (finish time, seq, client, start version, start time)
  heap: list[tuple[float, int, int, int, float]] = []
  seq = 0

  def start_job(c: int, version: int, now: float) -> None:
    nonlocal seq
    d = float(durations.draw(rng, np.array([c]))[0])
    heapq.heappush(heap, (now + d, seq, c, version, now))
    seq += 1

  for c, d in zip(first, durations.draw(rng, first), strict=True):  # as FedBuff's clock
    heapq.heappush(heap, (float(d), seq, int(c), 0, 0.0))
    seq += 1
  rows, wall, buffer = [], [], []
  version = 0
  while version < t_max:
    now, _, c, s, _ = heapq.heappop(heap)
    buffer.append((c, s, int(steps[c])))
    if len(buffer) < m:
      start_job(pool.draw(rng), version, now)  # a finished client is replaced at once
      continue
    too_stale = [j for j in heap if j[3] < version + 1 - bound]
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
