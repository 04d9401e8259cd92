"""Servers that feed the aggregated pseudo-gradient to an optax optimizer (FedOPT view).

The messages of one server step are averaged (:func:`aggregate`) and the mean
``g_t = (1/|S_t|) sum_{i in S_t} Delta_i`` is treated as a gradient:
``updates, opt_state = optimizer.update(g_t, opt_state, x_t)``,
``x_{t+1} = x_t + updates``.

* FedAvg (McMahan et al., 2017, Alg. 1): ``optax.sgd(1.0)`` on synchronous cohorts,
  so ``x_{t+1} = sum_i (n_i / n) x_i``, weighted by the clients' example counts
  (``weighting='examples'``, the default of :func:`fedavg`; :mod:`afl_jax.servers.weighting`).
* FedBuff (Nguyen et al., 2022, Alg. 1): ``optax.sgd(eta_g)``:
  ``x <- x + eta_g * mean of the M buffered (x_local - x_start)``.
* FedAvgM / FedAdam / FedYogi / FedAdagrad (Reddi et al., 2021): any optax optimizer.

``normalizer='clients'`` divides the sum by the number of clients n instead of
|S_t| (AsynFL eq. 5, Yang et al.). Every server here takes ``weighting``
('uniform' or 'examples', by the example counts the messages carry); only valid
arrivals count, never the engine's padded slots.

A step with no valid arrival leaves the state unchanged: neither a momentum or
adaptive step nor the optimizer's step count (Multistage FedGM's stages) advances.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import optax

from afl_jax.core import checks, tree
from afl_jax.core.types import Arrivals, ServerRule, unchanged_if_no_arrival
from afl_jax.servers import weighting as weighting_lib

NORMALIZERS = ('arrivals', 'clients')


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
  """Weighted mean of the valid stacked messages (:func:`afl_jax.servers.weighting.row_weights`).

  Uniform: over |S_t| or over n. By examples (``arrivals.num_examples``):
  ``n_i / sum_{S_t} n_j`` or ``n_i / sum_N n_j``.
  """
  weights = weighting_lib.row_weights(arrivals, normalizer, num_clients, examples)
  return tree.weighted_sum(messages, weights)


def step_result(arrivals: Arrivals, new: Any, state: Any, **metrics: Any) -> tuple[Any, dict]:
  """A server step's return: ``new`` if any arrival is valid, else ``state``
  (:func:`~afl_jax.core.types.unchanged_if_no_arrival`), with the metrics led by
  ``update_norm = ||x_t - x_{t+1}||`` (0 on a step without arrivals)."""
  new = unchanged_if_no_arrival(arrivals, new, state)
  return new, {'update_norm': tree.global_norm(tree.sub(state.params, new.params)), **metrics}


def check_normalizer(normalizer: str, num_clients: int | None) -> None:
  checks.one_of('normalizer', normalizer, NORMALIZERS)
  if normalizer == 'clients' and (num_clients is None or num_clients < 1):
    raise ValueError(f"normalizer='clients' needs num_clients >= 1; got {num_clients!r}.")


def optimizer_server(
  optimizer: optax.GradientTransformation,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """A server applying ``optimizer`` to the mean pseudo-gradient of each step.

  ``weighting='examples'`` weights client i by the example count its message carries
  (:mod:`afl_jax.servers.weighting`); ``'uniform'`` (default) weights every arrival alike.
  """
  check_normalizer(normalizer, num_clients)
  examples = weighting_lib.check(weighting)

  def init(params):
    return OptimizerServerState(params, optimizer.init(params))

  def update(state, messages, arrivals, key):
    del key
    g = aggregate(messages, arrivals, normalizer, num_clients, examples)
    updates, opt_state = optimizer.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return step_result(arrivals, OptimizerServerState(params, opt_state), state)

  return ServerRule(init, update)


def fedavg(*, weighting: str = 'examples') -> ServerRule:
  """FedAvg's server: the new model is the weighted mean of the arriving client models.

  McMahan et al. 2017, Alg. 1: ``w_{t+1} = sum_k (n_k / n) w^k_{t+1}`` over the
  cohort, i.e. ``weighting='examples'`` (default, as in the paper; the counts travel
  with the messages); ``weighting='uniform'`` is the plain mean.
  """
  return optimizer_server(optax.sgd(1.0), weighting=weighting)


def fedbuff(server_lr: float = 1.0, *, weighting: str = 'uniform') -> ServerRule:
  """FedBuff's server: ``x <- x + eta_g * mean(x_local - x_start)`` over the buffer.

  Nguyen et al. 2022, Alg. 1 averages the buffer uniformly (default);
  ``weighting='examples'`` weights by the clients' example counts.
  """
  checks.positive('server_lr', server_lr)
  return optimizer_server(optax.sgd(server_lr), weighting=weighting)
