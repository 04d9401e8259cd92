"""FedGM (Sun et al.: eq. (2), its special cases, Alg. 3, Alg. 4) and FedOPT (Reddi et al. 2021:
optax's optimizers, or Alg. 2 as written) with local SGD (docs/algorithms/fedgm.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from afl_jax import checks
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  NEEDS_NUM_CLIENTS,
  SERVERS,
  ScalarOrSchedule,
  divide_by_local_steps,
  local_sgd,
  optimizer_server,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, ServerRule

# How a composing rule embeds these servers (the mean over |S_t| or all n clients): not settings.
NORMALIZER = ('normalizer', 'num_clients')

_METRIC_NAMES = {'learning_rate': 'server_lr', 'beta': 'beta', 'nu': 'nu'}
# FedGM's momentum factor beta and instant discount nu, and their stagewise sequences.
MOMENTUM = {'beta': checks.real(0.0, 1.0, high_open=True), 'nu': checks.real(0.0, 1.0)}
STAGES = {
  'stage_lengths': checks.integers(1),
  'server_lrs': checks.reals(0.0, low_open=True),
  'betas': checks.reals(0.0, 1.0, high_open=True),
  'nus': checks.reals(0.0, 1.0),
}


class QuasiHyperbolicMomentumState(NamedTuple):
  trace: Any  # d_t, the momentum buffer (same tree as the params; d_0 = 0)


def quasi_hyperbolic_momentum(beta, nu) -> optax.GradientTransformation:
  """Eq. (2)'s ``d_{t+1} = (1 - beta) g + beta d_t``, ``h_{t+1} = (1 - nu) g + nu d_{t+1}``."""

  def init(params):
    return QuasiHyperbolicMomentumState(tree.zeros_like(params))

  def update(updates, state, params=None):
    del params
    trace = jax.tree.map(
      lambda g, d: ((1 - beta) * g + beta * d).astype(d.dtype), updates, state.trace
    )
    h = jax.tree.map(lambda g, d: ((1 - nu) * g + nu * d).astype(g.dtype), updates, trace)
    return h, QuasiHyperbolicMomentumState(trace)

  return optax.GradientTransformation(init, update)


def general_momentum(learning_rate, beta, nu) -> optax.GradientTransformation:
  return optax.chain(
    quasi_hyperbolic_momentum(beta, nu), optax.scale_by_learning_rate(learning_rate)
  )


@SERVERS.register('fedgm', context=NORMALIZER, rules=(NEEDS_NUM_CLIENTS,), **MOMENTUM)
def fedgm_server(
  server_lr: ScalarOrSchedule = 1.0,
  beta: ScalarOrSchedule = 0.9,
  nu: ScalarOrSchedule = 0.7,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """FedGM's server (eq. (2)); each hyperparameter a number or an optax schedule of the step."""
  optimizer = optax.inject_hyperparams(general_momentum)(learning_rate=server_lr, beta=beta, nu=nu)
  rule = optimizer_server(
    optimizer, normalizer=normalizer, num_clients=num_clients, weighting=weighting
  )

  def update(state, messages, arrivals, key):
    state, metrics = rule.update(state, messages, arrivals, key)
    used = state.opt_state.hyperparams
    return state, {**metrics, **{out: used[k] for k, out in _METRIC_NAMES.items()}}

  return rule._replace(update=update)


def stagewise_constant(values: Sequence[float], stage_lengths: Sequence[int]) -> optax.Schedule:
  """Alg. 3's "constant and drop": ``values[s]`` through stage s (one per stage), the last value
  after."""
  boundaries = [int(b) for b in np.cumsum(stage_lengths)[:-1]]
  stages = [optax.constant_schedule(float(v)) for v, _ in zip(values, stage_lengths, strict=True)]
  return optax.join_schedules(stages, boundaries)


def _one_per_stage(field: str) -> checks.Rule:
  def problem(stage_lengths, **values):
    n = len(values[field])
    if n != len(stage_lengths):
      return f'has {n} entries but stage_lengths has {len(stage_lengths)}; give one per stage'
    return None

  return checks.Rule(field, problem, reads=('stage_lengths', field))


# Multistage defaults: Fig. 2's eta = (2.0, 1.0, 0.5) with stage lengths and (beta_s, nu_s)
# meeting constraint (3): T_s eta_s = 286 and eta_s beta_s nu_s / (1 - beta_s) = 4.5.
@SERVERS.register(
  'multistage_fedgm',
  context=NORMALIZER,
  rules=(NEEDS_NUM_CLIENTS, *map(_one_per_stage, ('server_lrs', 'betas', 'nus'))),
  **STAGES,
)
def multistage_fedgm_server(
  stage_lengths: Sequence[int] = (143, 286, 572),
  server_lrs: Sequence[float] = (2.0, 1.0, 0.5),
  betas: Sequence[float] = (0.9, 0.9, 0.9),
  nus: Sequence[float] = (0.25, 0.5, 1.0),
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """Multistage FedGM (Alg. 3): FedGM(eta_s, beta_s, nu_s) for T_s steps, ``d`` carried across."""
  return fedgm_server(
    *(stagewise_constant(v, stage_lengths) for v in (server_lrs, betas, nus)),
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )


# ---- FedOPT (Reddi et al. 2021) ---------------------------------------------------------------
OPTIMIZERS = ('sgd', 'adam', 'yogi', 'adagrad', 'amsgrad')
# The options selecting a variant of Alg. 2, with the values that leave optax's optimizer as is.
ALG2_OPTIONS = {
  'bias_correction': False,
  'bias_correction_offset': 1,
  'tau_placement': 'outside',
  'initial_accumulator': None,
}


def _alg2_only(field: str) -> checks.Rule:
  def problem(convention, **value):
    if convention == 'optax' and value[field] != ALG2_OPTIONS[field]:
      return (
        f"selects a variant of Reddi et al.'s Alg. 2: pass convention='alg2' with it (or "
        f'leave {field} at {ALG2_OPTIONS[field]!r})'
      )
    return None

  return checks.Rule(field, problem, reads=('convention', field))


FEDOPT_RULES = (
  NEEDS_NUM_CLIENTS,
  *map(_alg2_only, ALG2_OPTIONS),
  checks.Rule(
    'server_optimizer',
    lambda convention, server_optimizer: (
      "'amsgrad' is optax's only: convention='alg2' covers 'adagrad', 'yogi' and 'adam' "
      "(Reddi et al. Alg. 2); pass convention='optax'"
      if convention == 'alg2' and server_optimizer == 'amsgrad'
      else None
    ),
  ),
  checks.Rule(
    'bias_correction',
    lambda server_optimizer, bias_correction: (
      "applies to 'adam' and 'yogi' only: FedAdagrad's v is a sum, not an average; pass "
      'bias_correction=False'
      if bias_correction and server_optimizer == 'adagrad'
      else None
    ),
  ),
)


@SERVERS.register(
  'fedopt',
  context=NORMALIZER,
  rules=FEDOPT_RULES,
  server_optimizer=checks.choice(OPTIMIZERS),
  convention=checks.choice(('optax', 'alg2')),
  tau=checks.POSITIVE,
  bias_correction=checks.boolean(),
  bias_correction_offset=checks.integer(1),
  tau_placement=checks.choice(('outside', 'inside')),
  initial_accumulator=checks.NON_NEGATIVE,
)
def fedopt_server(
  server_optimizer: str = 'adam',
  server_lr: ScalarOrSchedule = 0.01,
  *,
  beta1: float = 0.9,
  beta2: float = 0.99,
  tau: float = 1e-3,
  convention: str = 'optax',
  bias_correction: bool = False,
  bias_correction_offset: int = 1,
  tau_placement: str = 'outside',
  initial_accumulator: float | None = None,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """FedOPT's ServerOPT on the mean pseudo-gradient: optax's optimizers
  (``convention='optax'``) or Alg. 2 as written (``'alg2'``, with its variants)."""
  if server_optimizer == 'sgd':
    optimizer = optax.sgd(server_lr)
  elif convention == 'alg2':
    variant = (bias_correction, bias_correction_offset, tau_placement, initial_accumulator)
    direction = scale_by_alg2(server_optimizer, beta1, beta2, tau, *variant)
    optimizer = optax.chain(direction, optax.scale_by_learning_rate(server_lr))
  elif server_optimizer == 'adagrad':
    optimizer = optax.adagrad(server_lr, initial_accumulator_value=0.0, eps=tau**2)
  else:
    factory = {'adam': optax.adam, 'yogi': optax.yogi, 'amsgrad': optax.amsgrad}[server_optimizer]
    optimizer = factory(server_lr, b1=beta1, b2=beta2, eps=tau)
  return optimizer_server(
    optimizer, normalizer=normalizer, num_clients=num_clients, weighting=weighting
  )


class Alg2State(NamedTuple):
  count: jax.Array  # int32 []: server updates so far (t)
  mu: Any  # m_{t-1}
  nu: Any  # v_{t-1}


def scale_by_alg2(
  rule, beta1, beta2, tau, bias_correction, bias_correction_offset, tau_placement, v0
) -> optax.GradientTransformation:
  """Alg. 2's direction ``m_t / (sqrt(v_t) + tau)`` for ``rule`` ('adagrad', 'yogi' or 'adam');
  chain it with a learning rate; ``v0`` the initial accumulator (None: ``tau^2``)."""
  v0 = tau**2 if v0 is None else v0

  def init(params):
    nu = jax.tree.map(lambda p: jnp.full_like(p, v0), params)
    return Alg2State(jnp.zeros([], jnp.int32), tree.zeros_like(params), nu)

  def second_moment(v, g):
    g2 = g * g
    if rule == 'adagrad':
      return v + g2
    if rule == 'yogi':
      return v - (1 - beta2) * g2 * jnp.sign(v - g2)
    return beta2 * v + (1 - beta2) * g2

  def update(updates, state, params=None):
    del params
    mu = jax.tree.map(lambda m, g: (beta1 * m + (1 - beta1) * g).astype(m.dtype), state.mu, updates)
    nu = jax.tree.map(lambda v, g: second_moment(v, g).astype(v.dtype), state.nu, updates)

    def direction(m, v):
      denom = jnp.sqrt(v) + tau if tau_placement == 'outside' else jnp.sqrt(v + tau**2)
      out = m / denom
      if bias_correction:
        power = (state.count + bias_correction_offset).astype(m.dtype)
        out = out * (jnp.sqrt(1 - jnp.power(beta2, power)) / (1 - jnp.power(beta1, power)))
      return out.astype(m.dtype)

    return jax.tree.map(direction, mu, nu), Alg2State(state.count + 1, mu, nu)

  return optax.GradientTransformation(init, update)


# ---- the algorithms -----------------------------------------------------------------------------
SERVER_RULES = {
  'fedgm': fedgm_server,
  'multistage': multistage_fedgm_server,
  'fedopt': fedopt_server,
}


def _momentum(
  client_lr: float = 0.01, *, label: str, rule: str, autonomous: bool, **server: Any
) -> Algorithm:
  """Server ``rule`` with local-SGD clients; ``autonomous``: they send ``Delta / K_{t,i}``
  (Alg. 4); FedNAG's nu is its beta."""
  client = divide_by_local_steps(local_sgd(client_lr)) if autonomous else local_sgd(client_lr)
  server = server | {'nu': server['beta']} if label == 'fednag' else server
  return Algorithm(label, client, SERVER_RULES[rule](**server))


def _variant(label: str, rule: str = 'fedgm', autonomous: bool = False, **fixed: Any):
  fixed |= {'label': label, 'rule': rule, 'autonomous': autonomous}
  return ALGORITHMS.register(label, _momentum, uses=(SERVER_RULES[rule],), fixed=fixed)


fedgm = _variant('fedgm')
autonomous_fedgm_single_stage = _variant('autonomous_fedgm_single_stage', autonomous=True)  # Alg. 4
fedsgd = _variant('fedsgd', beta=0.0, nu=0.0)  # FedGM(beta=0, nu=0): two-sided learning rates
fedavgm = _variant('fedavgm', nu=1.0)  # FedGM(nu=1)
fednag = _variant('fednag', nu=None)  # FedGM(nu=beta)
multistage_fedgm = _variant('multistage_fedgm', 'multistage')
autonomous_fedgm = _variant('autonomous_fedgm', 'multistage', autonomous=True)  # Alg. 4
fedopt = _variant('fedopt', 'fedopt')
