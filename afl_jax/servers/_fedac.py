"""FedAC's server: similarity-weighted buffer, prospective (Nesterov) adaptive momentum.

Zang, Xue, Ou, Chu, Du, Long, "Efficient Asynchronous Federated Learning with
Prospective Momentum Aggregation and Fine-Grained Correction", AAAI 2024 (FedAC),
as the FedAC of the AFL-Lib benchmark (boyi-liu/AFL-Lib ``alg/fedac.py``) writes it:
the paper's text was not available to us. The server's parts, with the equations in
(docs/algorithms/fedac.md, "Equations as implemented"):

1. client weights ``w_i`` from the clipped cosine of the server's movement
   ``x_t - x_{s_i}`` with ``Delta_i`` (floor ``r_min``; ``zero_cosine`` for a zero
   vector, ``first_update`` for the first update; uniform if every weight is 0);
2. prospective weighted momentum with an adaptive rate on ``g_t = sum_i w_i Delta_i``
   (:func:`scale_by_prospective_momentum`, an ``optax.GradientTransformation``; no bias
   correction, ``m_0 = v_0 = 0``);
3. the global control variate moved by the same weights (the client's half of the
   correction is :mod:`afl_jax.clients.fedac`).

Every reading (and AFL-Lib's current one) is in (docs/algorithms/fedac.md, "Readings
taken"). The broadcast is :class:`~afl_jax.core.messages.FedACBroadcast`
``(x, c, applied)``, ``applied[i]`` counting the jobs of client i applied, which
makes a client's variate causal. With ``Delta_i = x_start - x_local`` the paper's
``x + eta m_hat / ...`` is ``x - eta m_hat / ...`` here; a step with no valid arrival
leaves the state unchanged.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax.core import checks, tree
from afl_jax.core.messages import FedACBroadcast, FedACMessage
from afl_jax.core.types import Arrivals, Params, ServerRule
from afl_jax.servers.adaptive import moments
from afl_jax.servers.pseudo_gradient import step_result


class MomentumState(NamedTuple):
  mu: Params  # m_t
  nu: Params  # v_t


def scale_by_prospective_momentum(
  beta1: float = 0.6, beta2: float = 0.9, epsilon: float = 1e-8
) -> optax.GradientTransformation:
  """``(beta1 m_t + (1 - beta1) g_t) / (sqrt(v_t) + epsilon)``: FedAC's server direction.

  ``m_t, v_t`` are the usual first and second moments of ``g_t`` (no bias correction);
  the numerator looks one momentum step ahead (Nesterov), FedAC's "prospective"
  momentum.
  """

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
  """FedAC's w_i: clipped cosine of (x_{s_i} - x_t, Delta_i), normalized over S_t.

  ``zero_cosine`` is the cosine taken where a norm is 0. ``first``: a traced bool; where
  True, the reference is the model itself (``-x_t`` in our signs) instead of the
  movement (AFL-Lib's first update); None: always the movement.
  """
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
    """N, the clients whose applied jobs are counted (ids in [0, N)); the engine checks it."""
    return self.applied.shape[0]


def init_state(params: Params, num_clients: int, beta1=0.6, beta2=0.9, epsilon=1e-8):
  """``c = 0``, no job applied, ``m_0 = v_0 = 0``."""
  checks.positive_int('num_clients', num_clients)
  opt = scale_by_prospective_momentum(beta1, beta2, epsilon)
  return FedACState(
    params, tree.zeros_like(params), jnp.zeros((num_clients,), jnp.int32), opt.init(params)
  )


def fedac_server(
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
  """The FedAC server.

  Args:
    server_lr: eta, the global learning rate (> 0).
    beta1, beta2: decays of the first and second moments, in [0, 1).
    epsilon: added to ``sqrt(v)`` (> 0).
    min_similarity: r_min, the floor of the clipped cosine, in [-1, 1] (0 here and in
      the AFL-Lib version these equations follow; AFL-Lib uses 0.1 since July 2025).
    zero_cosine: the cosine taken where the movement or the update is the zero vector
      (a fresh arrival), in [-1, 1]: 1 (default: no evidence of conflict) or 0
      (PyTorch's ``cosine_similarity``, as in AFL-Lib).
    first_update: the reference vector of the server's first update (no job applied
      yet, so every start is ``x_0``): 'movement' (default; ``x_{s_i} - x_t = 0``, so
      ``zero_cosine``) or 'model' (the model itself, as AFL-Lib does).
    num_clients: N, the clients 0..N-1 whose applied jobs ``init(params)`` counts.
      The registry's ``'fedac'`` sizes the count from the problem's clients
      (``Algorithm.init``), so this matters only when the rule is used on its own;
      the engine refuses a problem with another number of clients.
  """
  checks.positive('server_lr', server_lr)
  checks.in_range('beta1', beta1, 0.0, 1.0, high_open=True)
  checks.in_range('beta2', beta2, 0.0, 1.0, high_open=True)
  checks.positive('epsilon', epsilon)
  checks.in_range('min_similarity', min_similarity, -1.0, 1.0)
  checks.in_range('zero_cosine', zero_cosine, -1.0, 1.0)
  checks.one_of('first_update', first_update, FIRST_UPDATES)
  checks.positive_int('num_clients', num_clients)
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
