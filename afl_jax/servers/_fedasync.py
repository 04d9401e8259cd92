"""FedAsync's mixing server (Xie, Koyejo, Gupta 2019, Alg. 1, Sec. 5.2), arrivals mixed in slot
order (docs/algorithms/baselines.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.core import checks, tree
from afl_jax.core.types import ServerRule

STALENESS_FUNCTIONS = ('constant', 'polynomial', 'hinge')
_S = {'a': checks.NON_NEGATIVE, 'b': checks.NON_NEGATIVE}  # the parameters of s(tau)


class FedAsyncState(NamedTuple):
  params: Any


@checks.validated(kind=checks.choice(STALENESS_FUNCTIONS), **_S)
def staleness_function(
  kind: str = 'constant', a: float = 0.5, b: float = 4.0
) -> Callable[[jax.Array], jax.Array]:
  """s(tau) of Sec. 5.2: constant, polynomial or hinge."""
  if kind == 'constant':
    return lambda tau: jnp.ones_like(tau)
  if kind == 'polynomial':
    return lambda tau: (1.0 + tau) ** (-a)
  return lambda tau: jnp.where(tau <= b, 1.0, 1.0 / (a * (tau - b) + 1.0))


@checks.validated(
  alpha=checks.real(0.0, 1.0, low_open=True),
  staleness=checks.choice(STALENESS_FUNCTIONS),
  **_S,
)
def fedasync(
  alpha: float = 0.6, staleness: str = 'polynomial', a: float = 0.5, b: float = 4.0
) -> ServerRule:
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
