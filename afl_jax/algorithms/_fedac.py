"""FedAC (Zang et al., AAAI 2024) as AFL-Lib writes it, with SCAFFOLD's option II variate
(Karimireddy et al. 2020, eq. (4)) (docs/algorithms/fedac.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax import checks
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  CLIENTS,
  SERVERS,
  cosine_rows,
  joint_init,
  moments,
  normalized_weights,
  sgd_with_mean_gradient,
  step_result,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, ClientRule, Params, ServerRule


class FedACBroadcast(NamedTuple):
  params: Params  # x_t
  variate: Params  # c: the global control variate
  applied: jax.Array  # int32[N]: jobs of each client applied so far


class FedACMessage(NamedTuple):
  delta: Params  # Delta_i = x_start - x_K
  variate_change: Params  # c_i^+ - c_i


class FedACClientState(NamedTuple):
  variates: Params  # [H, ...]: c_i of this client's jobs n-H+1..n (slot (n-1) mod H)
  count: jax.Array  # int32 scalar n: this client's jobs that have arrived


@CLIENTS.register('fedac', history=checks.integer(1))
def fedac_client(client_lr: float, *, history: int = 2, correction: bool = True) -> ClientRule:
  """FedAC's client keeping H = ``history`` variates; ``correction=False`` drops ``c - c_i``."""

  def init(params, task, key):
    return FedACClientState(
      tree.zeros_like(tree.stack_n(params, history)), jnp.zeros((), jnp.int32)
    )

  def update(start: FedACBroadcast, state: FedACClientState, task, key):
    # c_i of the job the server last applied (0: zeros); the oldest kept one if evicted
    applied = start.applied[task.client_id]
    evicted = (applied > 0) & (applied <= state.count - history)
    job = jnp.where(evicted, state.count - history + 1, applied)
    own = tree.gather(state.variates, jnp.mod(job - 1, history))
    own = tree.where(job > 0, own, tree.zeros_like(own))
    corr = tree.sub(start.variate, own) if correction else tree.zeros_like(own)

    direction = lambda grad: tree.add(grad, corr)
    final, new_variate, metrics = sgd_with_mean_gradient(
      task, key, start.params, client_lr, direction
    )
    slot = jnp.mod(state.count, history)
    variates = jax.tree.map(
      lambda h, v: h.at[slot].set(v.astype(h.dtype)), state.variates, new_variate
    )
    message = FedACMessage(tree.sub(start.params, final), tree.sub(new_variate, own))
    metrics = {**metrics, 'variate_evicted': evicted.astype(jnp.float32)}
    return message, FedACClientState(variates, state.count + 1), metrics

  return ClientRule(init, update)


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
    step = lambda m, g, v: ((beta1 * m + (1 - beta1) * g) / (jnp.sqrt(v) + epsilon)).astype(g.dtype)
    out = jax.tree.map(step, mu, updates, nu)
    return out, MomentumState(mu, nu)

  return optax.GradientTransformation(init, update)


FIRST_UPDATES = ('movement', 'model')


class FedACState(NamedTuple):
  params: Params  # x_t
  variate: Params  # c
  applied: jax.Array  # int32[N]
  opt_state: MomentumState

  @property
  def num_clients(self) -> int:
    return self.applied.shape[0]


def init_state(params: Params, num_clients: int, beta1=0.6, beta2=0.9, epsilon=1e-8):
  opt = scale_by_prospective_momentum(beta1, beta2, epsilon)
  applied = jnp.zeros((num_clients,), jnp.int32)
  return FedACState(params, tree.zeros_like(params), applied, opt.init(params))


@SERVERS.register(
  'fedac',
  context=('num_clients',),
  min_similarity=checks.real(-1.0, 1.0),
  zero_cosine=checks.real(-1.0, 1.0),
  first_update=checks.choice(FIRST_UPDATES),
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
  """The FedAC server; ``zero_cosine``, ``first_update``: readings (docs/algorithms/fedac.md)."""
  opt = scale_by_prospective_momentum(beta1, beta2, epsilon)

  def init(params):
    return init_state(params, num_clients, beta1, beta2, epsilon)

  def update(state, messages, arrivals, key):
    del key
    mask, ids = arrivals.mask, arrivals.client_ids
    # w_i: cos(x_{s_i} - x_t, Delta_i) clipped below at min_similarity, normalized over S_t;
    # 'model': the first update's reference is the model itself
    x = state.params
    moved = jax.tree.map(lambda s, x: s - x[None], arrivals.start_broadcast.params, x)
    if first_update == 'model':
      first = jnp.sum(state.applied) == 0
      moved = jax.tree.map(lambda m, x: jnp.where(first, -x[None], m), moved, x)
    cos = cosine_rows(moved, messages.delta, zero_cosine)
    w = normalized_weights(jnp.maximum(cos, min_similarity), mask)
    g = tree.weighted_sum(messages.delta, w)
    direction, opt_state = opt.update(g, state.opt_state)
    params = tree.axpy(-server_lr, direction, state.params)
    variate = tree.add(state.variate, tree.weighted_sum(messages.variate_change, w))
    applied = state.applied.at[jnp.where(mask, ids, state.num_clients)].add(1, mode='drop')
    new = FedACState(params, variate, applied, opt_state)
    return step_result(arrivals, new, state, weight_max=jnp.max(jnp.where(mask, w, 0.0)))

  def broadcast(state: FedACState) -> FedACBroadcast:
    return FedACBroadcast(state.params, state.variate, state.applied)

  return ServerRule(init, update, broadcast)


@ALGORITHMS.register('fedac', uses=(fedac_server, fedac_client))
def fedac(client_lr: float = 0.1, **settings: Any) -> Algorithm:
  """FedAC with FedEcho's Table 8 ``client_lr``; the other settings are its client's and
  server's."""
  mine = {k: settings.pop(k) for k in ('history', 'correction')}
  client = fedac_client(client_lr, **mine)
  b1, b2, eps = settings['beta1'], settings['beta2'], settings['epsilon']
  init = joint_init(
    client, lambda params, tasks, _: init_state(params, tasks.client_id.size, b1, b2, eps)
  )
  return Algorithm('fedac', client, fedac_server(**settings), init=init)
