"""Server momentum (Sun et al., "On the Role of Server Momentum in Federated Learning"): FedGM (eq.
(2)), Multistage FedGM (Alg. 3) and FedOPT (Reddi et al. 2021) (docs/algorithms/fedgm.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
import optax

from afl_jax.core import checks, tree
from afl_jax.core.types import ServerRule
from afl_jax.servers._adaptive import ALG2, scale_by_alg2
from afl_jax.servers._pseudo_gradient import optimizer_server

ScalarOrSchedule = float | optax.Schedule
OPTIMIZERS = ('sgd', 'adam', 'yogi', 'adagrad', 'amsgrad')
CONVENTIONS = ('optax', 'alg2')
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


@checks.validated(**MOMENTUM)
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


@checks.validated(learning_rate=checks.POSITIVE, **MOMENTUM)
def general_momentum(learning_rate, beta, nu) -> optax.GradientTransformation:
  return optax.chain(
    quasi_hyperbolic_momentum(beta, nu), optax.scale_by_learning_rate(learning_rate)
  )


@checks.validated(**MOMENTUM)
def fedgm(
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
  """Alg. 3's "constant and drop": ``values[s]`` through stage s, the last value after."""
  if len(values) != len(stage_lengths):
    raise ValueError(
      f'got {len(values)} stage values for {len(stage_lengths)} stages; give one per stage.'
    )
  boundaries = [int(b) for b in np.cumsum(stage_lengths)[:-1]]
  return optax.join_schedules([optax.constant_schedule(float(v)) for v in values], boundaries)


@checks.validated(**STAGES)
def multistage_fedgm(
  stage_lengths: Sequence[int],
  server_lrs: Sequence[float],
  betas: Sequence[float],
  nus: Sequence[float],
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """Multistage FedGM (Alg. 3): FedGM(eta_s, beta_s, nu_s) for T_s steps, ``d`` carried across."""
  for name, values in (('server_lrs', server_lrs), ('betas', betas), ('nus', nus)):
    if len(values) != len(stage_lengths):
      raise ValueError(
        f'{name} has {len(values)} entries but stage_lengths has {len(stage_lengths)}; '
        'give one per stage.'
      )
  return fedgm(
    *(stagewise_constant(v, stage_lengths) for v in (server_lrs, betas, nus)),
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )


@checks.validated(
  server_optimizer=checks.choice(OPTIMIZERS), convention=checks.choice(CONVENTIONS), **ALG2
)
def fedopt_optimizer(
  server_optimizer: str,
  server_lr: ScalarOrSchedule,
  *,
  beta1: float = 0.9,
  beta2: float = 0.99,
  tau: float = 1e-3,
  convention: str = 'optax',
  bias_correction: bool = False,
  bias_correction_offset: int = 1,
  tau_placement: str = 'outside',
  initial_accumulator: float | None = None,
) -> optax.GradientTransformation:
  """FedOPT's ServerOPT: optax's optimizers (``convention='optax'``) or Alg. 2 as written
  (``'alg2'``)."""
  alg2 = dict(
    bias_correction=(bias_correction, False),
    bias_correction_offset=(bias_correction_offset, 1),
    tau_placement=(tau_placement, 'outside'),
    initial_accumulator=(initial_accumulator, None),
  )
  for field, (value, default) in alg2.items():
    if convention == 'optax' and value != default:
      raise ValueError(
        f"{field}={value!r} selects a variant of Reddi et al.'s Alg. 2: pass "
        f"convention='alg2' with it (or leave {field} at {default!r})."
      )
  if server_optimizer == 'sgd':
    return optax.sgd(server_lr)
  if convention == 'alg2':
    if server_optimizer == 'amsgrad':
      raise ValueError(
        "convention='alg2' covers 'adagrad', 'yogi' and 'adam' (Reddi et al. Alg. 2); "
        "'amsgrad' is optax's only: pass convention='optax'."
      )
    options = {k: v for k, (v, _) in alg2.items()}
    direction = scale_by_alg2(server_optimizer, beta1=beta1, beta2=beta2, tau=tau, **options)
    return optax.chain(direction, optax.scale_by_learning_rate(server_lr))
  if server_optimizer == 'adagrad':
    return optax.adagrad(server_lr, initial_accumulator_value=0.0, eps=tau**2)
  factory = {'adam': optax.adam, 'yogi': optax.yogi, 'amsgrad': optax.amsgrad}[server_optimizer]
  return factory(server_lr, b1=beta1, b2=beta2, eps=tau)


def fedopt(
  server_optimizer: str = 'adam',
  server_lr: ScalarOrSchedule = 0.01,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
  **options: Any,
) -> ServerRule:
  return optimizer_server(
    fedopt_optimizer(server_optimizer, server_lr, **options),
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )
