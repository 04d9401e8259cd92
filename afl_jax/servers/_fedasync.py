"""FedAsync (Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", 2019).

Every arrival mixes its local model into the global one (Alg. 1, Sec. 4):

.. math::  x_{t+1} = (1 - \\alpha_t) x_t + \\alpha_t x_{local},\\quad
           \\alpha_t = \\alpha\\, s(t - \\tau)

with the staleness functions of Sec. 5.2: constant ``s = 1``; polynomial
``s_a(tau) = (1 + tau)^(-a)``; hinge ``s_{a,b}(tau) = 1`` if ``tau <= b`` else
``1 / (a (tau - b) + 1)``. Here ``tau`` is the staleness t - s of the arrival.
``x_local = x_start - Delta`` is rebuilt from the client's start broadcast.

FedAsync is defined for one arrival per step; with several, they are mixed in one
after another in slot order (padding skipped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.core import checks, tree
from afl_jax.core.types import ServerRule

STALENESS_FUNCTIONS = ('constant', 'polynomial', 'hinge')


class FedAsyncState(NamedTuple):
  params: Any


def staleness_function(
  kind: str = 'constant', a: float = 0.5, b: float = 4.0
) -> Callable[[jax.Array], jax.Array]:
  """s(tau) of Xie et al. Sec. 5.2."""
  if kind == 'constant':
    return lambda tau: jnp.ones_like(tau)
  if kind == 'polynomial':
    checks.non_negative('polynomial staleness exponent a', a)
    return lambda tau: (1.0 + tau) ** (-a)
  if kind == 'hinge':
    checks.positive('hinge staleness a', a)
    checks.non_negative('hinge staleness b', b)
    return lambda tau: jnp.where(tau <= b, 1.0, 1.0 / (a * (tau - b) + 1.0))
  raise ValueError(f'staleness function {kind!r} is unknown; valid: {STALENESS_FUNCTIONS}.')


def fedasync_server(
  alpha: float = 0.6, staleness: str = 'polynomial', a: float = 0.5, b: float = 4.0
) -> ServerRule:
  """FedAsync's mixing server.

  Args:
    alpha: mixing weight in (0, 1].
    staleness: 'constant', 'polynomial' or 'hinge'.
    a, b: parameters of the staleness function.
  """
  checks.in_range('alpha', alpha, 0.0, 1.0, low_open=True)
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
