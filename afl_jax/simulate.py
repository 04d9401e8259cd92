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

from afl_jax.core.engine import SimState, Simulator
from afl_jax.core.problem import Problem
from afl_jax.core.types import Algorithm
from afl_jax.schedules.schedule import Schedule


class Result(NamedTuple):
  params_history: Any  # params after each server step, leading axis T
  metrics: dict  # per-step metrics, each [T]
  final_state: SimState


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
  """
  sim = Simulator(algorithm, problem, schedule, chunk_size=chunk_size, record_params=True)
  state = sim.init(params0, key)
  params, metrics = [], []
  while sim.position(state) < schedule.num_steps:
    state, out = sim.run_chunk(state, key)
    params.append(out['params'])
    metrics.append(out['metrics'])
  cat = lambda *xs: jax.numpy.concatenate(xs, axis=0)
  return Result(jax.tree.map(cat, *params), jax.tree.map(cat, *metrics), state)
