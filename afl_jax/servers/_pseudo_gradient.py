"""Servers that feed the mean pseudo-gradient of a step to an optax optimizer (FedOPT view).

``g_t = sum_i w_i Delta_i`` over the step's valid arrivals (:func:`aggregate`, weights
of :mod:`~afl_jax.servers._weighting`) is treated as a gradient:
``x_{t+1} = x_t + optimizer.update(g_t)``. FedAvg (McMahan et al. 2017, Alg. 1) is
``optax.sgd(1.0)`` weighted by examples, FedBuff (Nguyen et al. 2022, Alg. 1)
``optax.sgd(eta_g)``, FedAvgM / FedAdam / FedYogi (Reddi et al. 2021) any optax
optimizer; a step without a valid arrival changes nothing, not even the optimizer's
count (docs/algorithms/baselines.md).
"""

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
  """The weighted mean of the valid stacked messages (over |S_t|, or n for 'clients')."""
  return tree.weighted_sum(
    messages, _weighting.row_weights(arrivals, normalizer, num_clients, examples)
  )


def step_result(arrivals: Arrivals, new: Any, state: Any, **metrics: Any) -> tuple[Any, dict]:
  """``new`` if any arrival is valid, else ``state``, with the metrics led by
  ``update_norm = ||x_t - x_{t+1}||``."""
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
  """A server applying ``optimizer`` to the weighted mean pseudo-gradient of each step;
  ``normalizer='clients'`` divides by ``num_clients`` n instead of |S_t|."""
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
  """FedAvg's server (McMahan et al. 2017, Alg. 1): ``x_{t+1} = sum_k (n_k / n) x_k``
  over the cohort (``'uniform'``: the plain mean)."""
  return optimizer_server(optax.sgd(1.0), weighting=weighting)


@checks.validated()
def fedbuff(server_lr: float = 1.0, *, weighting: str = 'uniform') -> ServerRule:
  """FedBuff's server (Nguyen et al. 2022, Alg. 1): ``x <- x - eta_g mean_i Delta_i``."""
  return optimizer_server(optax.sgd(server_lr), weighting=weighting)
