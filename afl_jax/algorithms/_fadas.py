"""FADAS (Wang et al., ICML 2024, Alg. 1), the defaults the authors' commands
(docs/algorithms/ca2fl_fadas.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax import checks
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  SERVERS,
  local_sgd,
  moments,
  row_weights,
  step_result,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, Params, ServerRule

DELAY_RULES = ('min_inverse', 'divide')


class AMSGradState(NamedTuple):
  count: jax.Array  # int32 scalar: server steps applied
  mu: Params  # m_t
  nu: Params  # v_t
  nu_max: Params  # \hat v_t


def scale_by_amsgrad(
  beta1: float = 0.9, beta2: float = 0.99, epsilon: float = 1e-8, *, bias_correction: bool = False
) -> optax.GradientTransformation:
  """``m_t / (sqrt(max_{s<=t} v_s) + epsilon)``, the max over the raw ``v`` (optax's is over the
  corrected one)."""

  def init(params):
    zeros = tree.zeros_like(params)
    return AMSGradState(jnp.zeros((), jnp.int32), zeros, zeros, zeros)

  def update(updates, state, params=None):
    del params
    mu, nu = moments(beta1, beta2, state.mu, state.nu, updates)
    nu_max = jax.tree.map(jnp.maximum, state.nu_max, nu)
    count = state.count + 1
    t = count.astype(jnp.result_type(float))
    c1, c2 = (1 - beta1**t, 1 - beta2**t) if bias_correction else (1.0, 1.0)
    out = jax.tree.map(
      lambda m, v: ((m / c1) / (jnp.sqrt(v) / jnp.sqrt(c2) + epsilon)).astype(m.dtype), mu, nu_max
    )
    return out, AMSGradState(count, mu, nu, nu_max)

  return optax.GradientTransformation(init, update)


def delay_adaptive_rate(
  server_lr: float, tau_max: jax.Array, tau_c: int, rule: str = 'min_inverse'
) -> jax.Array:
  tau = jnp.maximum(tau_max, 1).astype(jnp.result_type(float))
  reduced = jnp.minimum(server_lr, 1.0 / tau) if rule == 'min_inverse' else server_lr / tau
  return jnp.where(tau_max > tau_c, reduced, server_lr)


class FADASState(NamedTuple):
  params: Params
  opt_state: AMSGradState


@SERVERS.register(
  'fadas',
  tau_c=checks.integer(0),
  delay_rule=checks.choice(DELAY_RULES),
)
def fadas_server(
  server_lr: float = 1e-4,
  beta1: float = 0.9,
  beta2: float = 0.99,
  epsilon: float = 1e-8,
  *,
  delay_adaptive: bool = True,
  tau_c: int = 1,
  delay_rule: str = 'min_inverse',
  bias_correction: bool = False,
  weighting: str = 'uniform',
) -> ServerRule:
  """The FADAS server; ``bias_correction``: Adam's (the authors' code, off in the paper)."""
  examples = weighting == 'examples'
  opt = scale_by_amsgrad(beta1, beta2, epsilon, bias_correction=bias_correction)

  def init(params: Params) -> FADASState:
    return FADASState(params, opt.init(params))

  def update(state, messages, arrivals, key):
    del key
    mask = arrivals.mask
    g = tree.weighted_sum(messages, row_weights(arrivals, examples=examples))
    direction, opt_state = opt.update(g, state.opt_state)
    tau_max = jnp.max(jnp.where(mask, arrivals.staleness, 0))
    eta = jnp.asarray(server_lr)
    if delay_adaptive:
      eta = delay_adaptive_rate(server_lr, tau_max, tau_c, delay_rule)
    new = FADASState(tree.axpy(-eta, direction, state.params), opt_state)
    return step_result(arrivals, new, state, server_lr=eta, tau_max=tau_max)

  return ServerRule(init, update)


@ALGORITHMS.register('fadas', uses=(fadas_server,))
def fadas(client_lr: float = 0.1, **server: Any) -> Algorithm:
  return Algorithm('fadas', local_sgd(client_lr), fadas_server(**server))
