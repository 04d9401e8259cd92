"""FedAC's server (Zang et al., AAAI 2024) as AFL-Lib's ``alg/fedac.py`` writes it: cosine-weighted
arrivals, a prospective adaptive momentum step and the global control variate
(docs/algorithms/fedac.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax.core import checks, tree
from afl_jax.core.messages import FedACBroadcast, FedACMessage
from afl_jax.core.types import Arrivals, Params, ServerRule
from afl_jax.servers._adaptive import moments
from afl_jax.servers._pseudo_gradient import step_result


class MomentumState(NamedTuple):
  mu: Params  # m_t
  nu: Params  # v_t


def scale_by_prospective_momentum(
  beta1: float = 0.6, beta2: float = 0.9, epsilon: float = 1e-8
) -> optax.GradientTransformation:
  """``(beta1 m_t + (1 - beta1) g_t) / (sqrt(v_t) + epsilon)`` (no bias correction)."""

  def init(params):
    zeros = tree.zeros_like(params)
    return MomentumState(zeros, zeros)

  def update(updates, state, params=None):
    del params
    mu, nu = moments(beta1, beta2, state.mu, state.nu, updates)
    out = jax.tree.map(
      lambda m, g, v: ((beta1 * m + (1 - beta1) * g) / (jnp.sqrt(v) + epsilon)).astype(g.dtype),
      mu,
      updates,
      nu,
    )
    return out, MomentumState(mu, nu)

  return optax.GradientTransformation(init, update)


def cosine_rows(a: Params, b: Params, empty: float) -> jax.Array:
  """``cos(a_m, b_m)`` for trees stacked on axis 0 (``empty`` where a norm is 0)."""

  def one(x, y):
    dot = tree.vdot(x, y)
    nx, ny = tree.global_norm(x), tree.global_norm(y)
    ok = (nx > 0) & (ny > 0)
    return jnp.where(ok, dot / jnp.where(ok, nx * ny, 1.0), empty)

  return jax.vmap(one)(a, b)


def normalized_weights(raw: jax.Array, mask: jax.Array) -> jax.Array:
  """``raw / sum(raw)`` over the valid rows; uniform over them when that sum is 0."""
  raw = jnp.where(mask, raw, 0.0)
  total = jnp.sum(raw)
  uniform = mask / jnp.maximum(jnp.sum(mask), 1)
  return jnp.where(total > 0, raw / jnp.where(total > 0, total, 1.0), uniform)


FIRST_UPDATES = ('movement', 'model')


def temporal_weights(
  params: Params,
  messages: Params,
  arrivals: Arrivals,
  min_similarity: Any,
  zero_cosine: Any = 1.0,
  first: jax.Array | None = None,
) -> jax.Array:
  """FedAC's w_i: cos(x_{s_i} - x_t, Delta_i) clipped below at ``min_similarity``, normalized over
  S_t; where ``first``, the reference is the model itself."""
  starts = arrivals.start_broadcast.params
  moved = jax.tree.map(lambda s, x: s - x[None], starts, params)  # x_{s_i} - x_t
  if first is not None:
    moved = jax.tree.map(lambda m, x: jnp.where(first, -x[None], m), moved, params)
  cos = cosine_rows(moved, messages, zero_cosine)
  return normalized_weights(jnp.maximum(cos, min_similarity), arrivals.mask)


class FedACState(NamedTuple):
  params: Params  # x_t
  variate: Params  # c
  applied: jax.Array  # int32[N]
  opt_state: MomentumState

  @property
  def num_clients(self) -> int:
    return self.applied.shape[0]


def init_state(params: Params, num_clients: int, beta1=0.6, beta2=0.9, epsilon=1e-8):
  """``c = 0``, no job applied, ``m_0 = v_0 = 0``."""
  opt = scale_by_prospective_momentum(beta1, beta2, epsilon)
  return FedACState(
    params, tree.zeros_like(params), jnp.zeros((num_clients,), jnp.int32), opt.init(params)
  )


@checks.validated(
  min_similarity=checks.real(-1.0, 1.0),
  zero_cosine=checks.real(-1.0, 1.0),
  first_update=checks.choice(FIRST_UPDATES),
)
def fedac(
  server_lr: float = 1e-4,
  beta1: float = 0.6,
  beta2: float = 0.9,
  epsilon: float = 1e-8,
  min_similarity: float = 0.0,
  *,
  zero_cosine: float = 1.0,
  first_update: str = 'movement',
  num_clients: int = 10,
) -> ServerRule:
  """The FedAC server; ``zero_cosine`` and ``first_update`` are readings (docs/algorithms/fedac.md);
  ``init`` counts clients 0..N-1."""
  opt = scale_by_prospective_momentum(beta1, beta2, epsilon)

  def init(params: Params) -> FedACState:
    return init_state(params, num_clients, beta1, beta2, epsilon)

  def update(
    state: FedACState, messages: FedACMessage, arrivals: Arrivals, key: jax.Array
  ) -> tuple[FedACState, dict[str, Any]]:
    del key
    mask, ids = arrivals.mask, arrivals.client_ids
    first = jnp.sum(state.applied) == 0 if first_update == 'model' else None
    w = temporal_weights(state.params, messages.delta, arrivals, min_similarity, zero_cosine, first)
    g = tree.weighted_sum(messages.delta, w)
    direction, opt_state = opt.update(g, state.opt_state)
    params = tree.axpy(-server_lr, direction, state.params)
    variate = tree.add(state.variate, tree.weighted_sum(messages.variate_change, w))
    n = state.applied.shape[0]
    applied = state.applied.at[jnp.where(mask, ids, n)].add(1, mode='drop')
    new = FedACState(params, variate, applied, opt_state)
    return step_result(arrivals, new, state, weight_max=jnp.max(jnp.where(mask, w, 0.0)))

  def broadcast(state: FedACState) -> FedACBroadcast:
    return FedACBroadcast(state.params, state.variate, state.applied)

  return ServerRule(init, update, broadcast)
