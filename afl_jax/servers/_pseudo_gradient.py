"""Servers feeding the weighted mean pseudo-gradient to an optax optimizer: FedAvg (McMahan et al.
2017), FedBuff (Nguyen et al. 2022), FedOPT (docs/algorithms/baselines.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import optax

from afl_jax.core import checks, tree
from afl_jax.core.types import Arrivals, ServerRule, unchanged_if_no_arrival
from afl_jax.servers import _weighting


class OptimizerServerState(NamedTuple):
  params: Any
  opt_state: optax.OptState


def aggregate(
  messages: Any,
  arrivals: Arrivals,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  examples: bool = False,
) -> Any:
  return tree.weighted_sum(
    messages, _weighting.row_weights(arrivals, normalizer, num_clients, examples)
  )


def step_result(arrivals: Arrivals, new: Any, state: Any, **metrics: Any) -> tuple[Any, dict]:
  """``new`` if any arrival is valid, else ``state``; metrics led by ``update_norm``."""
  new = unchanged_if_no_arrival(arrivals, new, state)
  return new, {'update_norm': tree.global_norm(tree.sub(state.params, new.params)), **metrics}


@checks.validated()
def optimizer_server(
  optimizer: optax.GradientTransformation,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  if normalizer == 'clients' and num_clients is None:
    raise ValueError("normalizer='clients' needs num_clients (n >= 1); got None.")
  examples = weighting == 'examples'

  def init(params):
    return OptimizerServerState(params, optimizer.init(params))

  def update(state, messages, arrivals, key):
    del key
    g = aggregate(messages, arrivals, normalizer, num_clients, examples)
    updates, opt_state = optimizer.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return step_result(arrivals, OptimizerServerState(params, opt_state), state)

  return ServerRule(init, update)


@checks.validated()
def fedavg(*, weighting: str = 'examples') -> ServerRule:
  """FedAvg's server (McMahan et al. 2017, Alg. 1)."""
  return optimizer_server(optax.sgd(1.0), weighting=weighting)


@checks.validated()
def fedbuff(server_lr: float = 1.0, *, weighting: str = 'uniform') -> ServerRule:
  """FedBuff's server (Nguyen et al. 2022, Alg. 1)."""
  return optimizer_server(optax.sgd(server_lr), weighting=weighting)
