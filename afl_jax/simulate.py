"""The verification entry point: replay a schedule and return every iterate.

>>> alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1, server_lr=1.0)
>>> problem = afl_jax.problems.from_loss(loss_fn, client_data, full_batch=True)
>>> schedule = afl_jax.schedules.from_arrays(client_ids, start_step, local_steps=2)
>>> result = afl_jax.simulate(alg, problem, schedule, params0, jax.random.key(0))
>>> result.params_history  # params after server steps 0..T-1, leading axis T
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from afl_jax.core.engine import SimState
from afl_jax.core.problem import Problem, check_params
from afl_jax.core.simulator import Simulator
from afl_jax.core.types import Algorithm
from afl_jax.schedules.schedule import Schedule


class Result(NamedTuple):
  """What :func:`simulate` returns: every iterate and every per-step metric.

  ``params_history`` is always filled here (``simulate`` records the params); with
  :class:`~afl_jax.core.simulator.Simulator`, ``run_chunk``'s output has ``'params'`` only
  with ``record_params=True``, and ``afl_jax.sweep``'s ``params_history`` is None
  unless ``record_params=True``.

  ``metrics`` maps a name to an array ``[T]`` (one value per server step):

  * ``'arrivals'``: the number of valid arrivals (messages sent) at the step;
  * ``'bits_up'``, ``'bits_down'``: bits of the step's uploads and broadcasts (32 per
    transmitted value, exact counts for compressed messages);
  * ``'client/<name>'``: each client metric averaged over the clients that trained at
    the step, e.g. ``'client/train_loss'`` (every local rule) or
    ``'client/variate_evicted'`` (FedAC);
  * ``'server/<name>'``: each server metric, e.g. ``'server/update_norm'`` (most
    servers), ``'server/server_lr'`` / ``'server/beta'`` / ``'server/nu'`` (FedGM),
    ``'server/aggregations'`` (FedFa), ``'server/weight_max'`` (FedAC).

  ``list(result.metrics)`` shows the keys of a given algorithm.
  """

  params_history: Any  # params after each server step, leading axis T
  metrics: dict  # per-step metrics, each [T]; keys in the docstring above
  final_state: SimState  # the engine's state after the last step (server, clients, ring)


def simulate(
  algorithm: Algorithm,
  problem: Problem,
  schedule: Schedule,
  params0: Any,
  key: jax.Array,
  *,
  chunk_size: int | None = None,
) -> Result:
  """Run ``algorithm`` on ``problem`` along ``schedule`` from ``params0``.

  Works in float64 when ``jax_enable_x64`` is on and ``params0`` is float64.

  Raises:
    ArgumentError: ``params0`` does not fit ``problem`` (its structure or leaf
      shapes are not what ``loss_fn`` reads; checked before compiling).
    ScheduleError: ``schedule`` was built for another number of clients than
      ``problem`` has (pass ``num_clients=`` to its builder).
  """
  check_params(problem, params0)
  sim = Simulator(algorithm, problem, schedule, chunk_size=chunk_size, record_params=True)
  state = sim.init(params0, key)
  params, metrics = [], []
  while sim.position(state) < schedule.num_steps:
    state, out = sim.run_chunk(state, key)
    params.append(out['params'])
    metrics.append(out['metrics'])
  cat = lambda *xs: jax.numpy.concatenate(xs, axis=0)
  return Result(jax.tree.map(cat, *params), jax.tree.map(cat, *metrics), state)
