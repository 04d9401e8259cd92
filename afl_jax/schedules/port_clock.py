"""Port's bounded-staleness event clock (Su & Li, IWQoS 2022), computed up front.

Port ("How Asynchronous can Federated Learning Be?", IEEE/ACM IWQoS 2022) runs on
FedBuff's event clock (:func:`afl_jax.schedules.builders.fedbuff`: ``concurrency``
clients train at once, the server steps once ``buffer_size`` jobs have finished)
plus a staleness bound B, as the authors' Plato server does it
(``plato/servers/base.py``, ``staleness_bound`` and ``request_update``): every
arrival has staleness ``tau = t - s <= B``. When the buffer is full, a job that would
arrive staler than B is waited for (``urgent=False``, Port-Non-Urgent: the step holds
more than ``buffer_size`` arrivals) or reports early with ``K' = max(1, floor(K *
elapsed / duration))`` of its K local steps (``urgent=True``, Port-Urgent):
(docs/algorithms/port.md, "The staleness bound: a scheduling mechanism"), where the
readings are too.

Before the buffer is full a finished client is replaced at once (FedBuff's clock);
after a step, idle clients drawn uniformly start from the new version until
``concurrency`` are training again. In a config it is the schedule kind ``port``
(:mod:`afl_jax.schedules.registry`).
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
