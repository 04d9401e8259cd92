"""FedAC's server: similarity-weighted buffer, prospective (Nesterov) adaptive momentum.

Zang, Xue, Ou, Chu, Du, Long, "Efficient Asynchronous Federated Learning with
Prospective Momentum Aggregation and Fine-Grained Correction", AAAI 2024 (FedAC). The
paper's three components, as implemented here (the equations follow the FedAC of the
AFL-Lib benchmark, boyi-liu/AFL-Lib ``alg/fedac.py``, since the paper's text was not
available to us; docs/algorithms/fedac.md lists every reading):

1. *Client weights from the temporal gradient.* For each valid arrival i of step t,
   with start model ``x_{s_i}`` (``s_i = t - tau_i``) and pseudo-gradient ``Delta_i``:

   .. math::
     r_i = \\max(\\cos(x_{s_i} - x_t, \\Delta_i), r_{\\min}), \\qquad
     w_i = r_i / \\textstyle\\sum_{j \\in S_t} r_j

   (``x_t - x_{s_i}`` is the server's movement while the client trained; the paper's
   client update is ``-Delta_i``, so this is cos(server move, client update)). A
   cosine with a zero vector (a fresh arrival, ``tau_i = 0``) is taken as
   ``zero_cosine`` (default 1), and if every ``r_i`` is 0 the weights are uniform.
   ``first_update='model'`` compares the server's first update with the model itself.
2. *Prospective weighted momentum with an adaptive rate* on ``g_t = sum_i w_i Delta_i``:

   .. math::
     m_t = \\beta_1 m_{t-1} + (1-\\beta_1) g_t, \\quad
     v_t = \\beta_2 v_{t-1} + (1-\\beta_2) g_t^2, \\quad
     \\hat m_t = \\beta_1 m_t + (1-\\beta_1) g_t,

     x_{t+1} = x_t - \\eta\\, \\hat m_t / (\\sqrt{v_t} + \\epsilon)

   (:func:`scale_by_prospective_momentum`, an ``optax.GradientTransformation``; no
   bias correction, ``m_0 = v_0 = 0``).
3. *Fine-grained correction* (the client, :mod:`afl_jax.clients.fedac`): the server
   keeps the global control variate ``c`` and moves it by the same weights,
   ``c <- c + sum_i w_i (c_i^+ - c_i)``, from the variate changes the clients send.

The broadcast is :class:`~afl_jax.core.messages.FedACBroadcast` ``(x, c, applied)``;
``applied[i]`` counts the jobs of client i the server has applied, which lets a client
with overlapping jobs use, causally, the variate of its latest job applied before this job started.

Sign convention: ``Delta_i = x_start - x_local`` (the paper's ``x_local - x_start``
negated), so the paper's ``x + eta m_hat / ...`` is our ``x - eta m_hat / ...``. A
step with no valid arrival leaves the state unchanged.
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
