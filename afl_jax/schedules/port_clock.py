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

from afl_jax.schedules.builders import fedbuff
from afl_jax.schedules.schedule import Schedule


def port_clock(
  num_clients: int,
  concurrency: int,
  buffer_size: int,
  staleness_bound: int,
  num_steps: int,
  **kwargs,
) -> Schedule:
  """FedBuff's event clock with Port's staleness bound B (see the module docstring).

  ``staleness_bound`` B (>= 0, an integer): no arrival is staler than B;
  ``buffer_size`` M is Port's minimum number of reports per aggregation. ``kwargs``
  (``urgent``, ``durations``, ``local_steps``, ``seed``) as in
  :func:`afl_jax.schedules.builders.fedbuff`.
  """
  return fedbuff(
    num_clients, concurrency, buffer_size, num_steps, staleness_bound=staleness_bound, **kwargs
  )
