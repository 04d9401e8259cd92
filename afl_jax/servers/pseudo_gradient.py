"""Servers that feed the aggregated pseudo-gradient to an optax optimizer (FedOPT view).

The messages of one server step are averaged (:func:`aggregate`) and the mean
``g_t = (1/|S_t|) sum_{i in S_t} Delta_i`` is treated as a gradient:
``updates, opt_state = optimizer.update(g_t, opt_state, x_t)``,
``x_{t+1} = x_t + updates``.

* FedAvg (McMahan et al., 2017): ``optax.sgd(1.0)`` on synchronous cohorts, so
  ``x_{t+1} = mean_i x_i`` (uniform weights).
* FedBuff (Nguyen et al., 2022, Alg. 1): ``optax.sgd(eta_g)``:
  ``x <- x + eta_g * mean of the M buffered (x_local - x_start)``.
* FedAvgM / FedAdam / FedYogi / FedAdagrad (Reddi et al., 2021): any optax optimizer.

``normalizer='clients'`` divides the sum by the number of clients n instead of
|S_t| (AsynFL eq. 5, Yang et al.).

A step with no valid arrival leaves the state unchanged: no momentum or adaptive
step is taken on an empty buffer, and the optimizer's step count (which drives
optax schedules such as Multistage FedGM's stages) counts server updates only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import optax

from afl_jax.core import tree
from afl_jax.core.types import Arrivals, ServerRule, unchanged_if_no_arrival

NORMALIZERS = ('arrivals', 'clients')


class OptimizerServerState(NamedTuple):
  params: Any
  opt_state: optax.OptState


def aggregate(
  messages: Any, arrivals: Arrivals, normalizer: str = 'arrivals', num_clients: int | None = None
) -> Any:
  """Masked mean of the stacked messages, over |S_t| or over n."""
  if normalizer == 'arrivals':
    return tree.masked_mean(messages, arrivals.mask)
  return tree.masked_mean(messages, arrivals.mask, denominator=jnp.asarray(num_clients))


def check_normalizer(normalizer: str, num_clients: int | None) -> None:
  if normalizer not in NORMALIZERS:
    raise ValueError(f'normalizer must be one of {NORMALIZERS}; got {normalizer!r}.')
  if normalizer == 'clients' and (num_clients is None or num_clients < 1):
    raise ValueError(f"normalizer='clients' needs num_clients >= 1; got {num_clients!r}.")


def optimizer_server(
  optimizer: optax.GradientTransformation,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
) -> ServerRule:
  """A server applying ``optimizer`` to the mean pseudo-gradient of each step."""
  check_normalizer(normalizer, num_clients)

  def init(params):
    return OptimizerServerState(params, optimizer.init(params))

  def update(state, messages, arrivals, key):
    del key
    g = aggregate(messages, arrivals, normalizer, num_clients)
    updates, opt_state = optimizer.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    new = unchanged_if_no_arrival(arrivals, OptimizerServerState(params, opt_state), state)
    return new, {'update_norm': tree.global_norm(tree.sub(new.params, state.params))}

  return ServerRule(init, update)


def fedavg() -> ServerRule:
  """FedAvg's server: the new model is the mean of the arriving client models."""
  return optimizer_server(optax.sgd(1.0))


def fedbuff(server_lr: float = 1.0) -> ServerRule:
  """FedBuff's server: ``x <- x + eta_g * mean(x_local - x_start)`` over the buffer."""
  if not server_lr > 0:
    raise ValueError(f'server_lr must be > 0; got {server_lr}.')
  return optimizer_server(optax.sgd(server_lr))
