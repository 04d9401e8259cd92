"""FedAvg, FedBuff and FedAsync (Alg. 1, Sec. 5.2) with local SGD, FedProx's clients (Alg. 2) or
FedNova's normalization (Sec. 5) on FedAvg and FedBuff (docs/algorithms/baselines.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax import checks
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  SERVERS,
  local_sgd,
  nova,
  optimizer_server,
  prox_sgd,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, ServerRule


@SERVERS.register('fedavg')
def fedavg_server(*, weighting: str = 'examples') -> ServerRule:
  """FedAvg's server (McMahan et al. 2017, Alg. 1)."""
  return optimizer_server(optax.sgd(1.0), weighting=weighting)


@SERVERS.register('fedbuff')
def fedbuff_server(server_lr: float = 1.0, *, weighting: str = 'uniform') -> ServerRule:
  """FedBuff's server (Nguyen et al. 2022, Alg. 1)."""
  return optimizer_server(optax.sgd(server_lr), weighting=weighting)


def _local_sgd(
  client_lr: float = 0.01,
  mu: float | None = 0.01,
  *,
  label: str,
  buffered: bool,
  normalized: bool,
  **server: Any,
) -> Algorithm:
  """Local SGD (FedProx's where ``mu`` is a number) on FedAvg's or (``buffered``) FedBuff's
  server, with FedNova's normalization where ``normalized``."""
  rule = (fedbuff_server if buffered else fedavg_server)(**server)
  rule = nova(rule, weighting=server['weighting']) if normalized else rule
  return Algorithm(label, local_sgd(client_lr) if mu is None else prox_sgd(client_lr, mu), rule)


def _variant(label: str, buffered: bool, *, prox: bool = False, normalized: bool = False):
  fixed = {'label': label, 'buffered': buffered, 'normalized': normalized}
  fixed |= {} if prox else {'mu': None}
  server = fedbuff_server if buffered else fedavg_server
  return ALGORITHMS.register(label, _local_sgd, uses=(server,), fixed=fixed)


fedavg = _variant('fedavg', False)
fedbuff = _variant('fedbuff', True)
fedprox = _variant('fedprox', False, prox=True)
fedbuff_prox = _variant('fedbuff_prox', True, prox=True)
fednova = _variant('fednova', False, normalized=True)
fedbuff_nova = _variant('fedbuff_nova', True, normalized=True)


# ---- FedAsync ---------------------------------------------------------------------------------
class FedAsyncState(NamedTuple):
  params: Any


def staleness_function(
  kind: str = 'constant', a: float = 0.5, b: float = 4.0
) -> Callable[[jax.Array], jax.Array]:
  """s(tau) of Sec. 5.2: constant, polynomial or hinge."""
  return {
    'constant': lambda tau: jnp.ones_like(tau),
    'polynomial': lambda tau: (1.0 + tau) ** (-a),
    'hinge': lambda tau: jnp.where(tau <= b, 1.0, 1.0 / (a * (tau - b) + 1.0)),
  }[kind]


@SERVERS.register(
  'fedasync',
  alpha=checks.real(0.0, 1.0, low_open=True),
  staleness=checks.choice(('constant', 'polynomial', 'hinge')),
  a=checks.NON_NEGATIVE,
  b=checks.NON_NEGATIVE,
)
def fedasync_server(
  alpha: float = 0.6, staleness: str = 'polynomial', a: float = 0.5, b: float = 4.0
) -> ServerRule:
  """Mixes each arrival in slot order: ``x <- (1 - alpha s(tau)) x + alpha s(tau) x_local``."""
  s = staleness_function(staleness, a, b)

  def init(params):
    return FedAsyncState(params)

  def update(state, messages, arrivals, key):
    del key
    local = tree.sub(arrivals.start_broadcast, messages)
    dtype = jax.tree.leaves(state.params)[0].dtype
    weights = alpha * s(arrivals.staleness.astype(dtype))

    def mix(x, item):
      x_local, w, valid = item
      w = jnp.where(valid, w, 0.0)
      mixed = jax.tree.map(lambda g, c: ((1 - w) * g + w * c).astype(g.dtype), x, x_local)
      return tree.where(valid, mixed, x), w  # a padded slot never touches x

    params, used = jax.lax.scan(mix, state.params, (local, weights, arrivals.mask))
    return FedAsyncState(params), {
      'mixing_weight': jnp.sum(used) / jnp.maximum(jnp.sum(arrivals.mask), 1)
    }

  return ServerRule(init, update)


@ALGORITHMS.register('fedasync', uses=(fedasync_server,))
def fedasync(client_lr: float = 0.01, **server: Any) -> Algorithm:
  return Algorithm('fedasync', local_sgd(client_lr), fedasync_server(**server))
