"""Server momentum: FedGM, its special cases, Multistage FedGM and FedOPT optimizers.

Sun, Wu, Huang, Zhang, "On the Role of Server Momentum in Federated Learning":

* FedGM (Sec. 3, eq. (2)), the quasi-hyperbolic momentum (QHM, Ma & Yarats 2019)
  step on the mean pseudo-gradient ``Delta_t``, ``d_0 = 0``; ``nu = 0`` is FedSGD,
  ``nu = 1`` FedAvgM, ``nu = beta`` FedNAG (Sec. 3);
* Multistage FedGM (Alg. 3, lines 8-10): the same step with stagewise
  ``(eta_s, beta_s, nu_s)`` over 0-based intervals of server steps, ``d`` carried
  across stages; Autonomous Multistage FedGM (Alg. 4, lines 10-13) has the same
  server (its clients divide by K_{t,i}, ``afl_jax.clients.divide_by_local_steps``);
* FedOPT (Reddi et al. 2021; Alg. 1 of Sun et al.): any optax optimizer by name in
  :data:`OPTIMIZERS`, or Reddi et al.'s Alg. 2 as written (``convention='alg2'``,
  :mod:`afl_jax.servers.adaptive`).

Equations in (docs/algorithms/fedgm.md, "Equations as implemented"), readings in
(docs/algorithms/fedgm.md, "Readings taken"). The FedGM step is an
``optax.GradientTransformation`` (:func:`quasi_hyperbolic_momentum` chained with
``scale_by_learning_rate``) in ``optax.inject_hyperparams``, so every hyperparameter
may be a schedule of the server step count, applied by
:func:`afl_jax.servers.optimizer_server`; the values of each step are the metrics
``server_lr``, ``beta`` and ``nu``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
import optax

from afl_jax.core import checks, tree
from afl_jax.core.types import ServerRule
from afl_jax.servers import adaptive
from afl_jax.servers.pseudo_gradient import optimizer_server

ScalarOrSchedule = float | optax.Schedule
OPTIMIZERS = ('sgd', 'adam', 'yogi', 'adagrad', 'amsgrad')
CONVENTIONS = ('optax', 'alg2')
_METRIC_NAMES = {'learning_rate': 'server_lr', 'beta': 'beta', 'nu': 'nu'}


class QuasiHyperbolicMomentumState(NamedTuple):
  trace: Any  # d_t, the momentum buffer (same tree as the params; d_0 = 0)


def _is_number(value: Any) -> bool:
  return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


def quasi_hyperbolic_momentum(
  beta: float | jax.Array, nu: float | jax.Array
) -> optax.GradientTransformation:
  """The momentum part of FedGM eq. (2): returns ``h_{t+1}`` for the gradient ``Delta_t``.

  .. math::  d_{t+1} = (1 - \\beta) g + \\beta d_t,\\quad h_{t+1} = (1 - \\nu) g + \\nu d_{t+1}

  Args:
    beta: momentum factor in [0, 1).
    nu: instant discount factor in [0, 1].

  Returns:
    An ``optax.GradientTransformation`` whose state holds ``d`` (initialized to 0).
  """
  checks.in_range('beta', beta, 0.0, 1.0, high_open=True)
  checks.in_range('nu', nu, 0.0, 1.0)

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


def general_momentum(
  learning_rate: float | jax.Array, beta: float | jax.Array, nu: float | jax.Array
) -> optax.GradientTransformation:
  """The whole FedGM server step as an optax optimizer: updates ``-eta * h_{t+1}``.

  Takes numbers (or traced scalars); for schedules of the step count wrap it in
  ``optax.inject_hyperparams``, as :func:`fedgm` does.
  """
  checks.positive('learning_rate', learning_rate)
  return optax.chain(
    quasi_hyperbolic_momentum(beta, nu), optax.scale_by_learning_rate(learning_rate)
  )


def _with_hyperparameter_metrics(rule: ServerRule) -> ServerRule:
  """Add the injected hyperparameters used at this step to the server metrics."""

  def update(state, messages, arrivals, key):
    state, metrics = rule.update(state, messages, arrivals, key)
    used = state.opt_state.hyperparams
    return state, {**metrics, **{out: used[k] for k, out in _METRIC_NAMES.items()}}

  return rule._replace(update=update)


def fedgm_server(
  server_lr: ScalarOrSchedule = 1.0,
  beta: ScalarOrSchedule = 0.9,
  nu: ScalarOrSchedule = 0.7,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """FedGM's server (eq. (2)); each hyperparameter a number or an optax schedule of t.

  Args:
    server_lr: eta > 0, the server learning rate.
    beta: momentum factor in [0, 1).
    nu: instant discount factor in [0, 1] (0: FedSGD, 1: FedAvgM, beta: FedNAG).
    normalizer: 'arrivals' (Delta_t = mean over S_t, as in the paper) or 'clients'.
    num_clients: n, needed for ``normalizer='clients'``.
    weighting: 'uniform' (the paper's mean over S_t) or 'examples' (client i
      weighted by the example count its message carries, :mod:`afl_jax.servers.weighting`).
  """
  checks.positive('server_lr', server_lr)
  checks.in_range('beta', beta, 0.0, 1.0, high_open=True)
  checks.in_range('nu', nu, 0.0, 1.0)
  optimizer = optax.inject_hyperparams(general_momentum)(learning_rate=server_lr, beta=beta, nu=nu)
  rule = optimizer_server(
    optimizer,
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )
  return _with_hyperparameter_metrics(rule)


def stagewise_constant(values: Sequence[float], stage_lengths: Sequence[int]) -> optax.Schedule:
  """Alg. 3's "constant and drop": ``values[s]`` on 0-based steps of stage s.

  Stage s covers ``[T_1 + ... + T_{s-1}, T_1 + ... + T_s)``; later steps keep the
  last value.
  """
  lengths = _check_stage_lengths(stage_lengths)
  if len(values) != len(lengths):
    raise ValueError(
      f'got {len(values)} stage values for {len(lengths)} stages; give one value per stage.'
    )
  boundaries = [int(b) for b in np.cumsum(lengths)[:-1]]
  return optax.join_schedules([optax.constant_schedule(float(v)) for v in values], boundaries)


def _check_stage_lengths(stage_lengths: Sequence[int]) -> list[int]:
  lengths = list(stage_lengths)
  if not lengths:
    raise ValueError('stage_lengths must name at least one stage; got [].')
  for s, length in enumerate(lengths):
    if not (_is_number(length) and int(length) == length and length >= 1):
      raise ValueError(f'stage_lengths[{s}] must be an integer >= 1; got {length!r}.')
  return [int(x) for x in lengths]


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
  """Multistage FedGM's server (Alg. 3): stage s runs FedGM(eta_s, beta_s, nu_s) for T_s steps.

  Args:
    stage_lengths: (T_1, ..., T_S), server steps per stage, each >= 1.
    server_lrs: (eta_1, ..., eta_S), each > 0.
    betas: (beta_1, ..., beta_S), each in [0, 1).
    nus: (nu_1, ..., nu_S), each in [0, 1].
    normalizer, num_clients, weighting: as in :func:`fedgm`.
  """
  lengths = _check_stage_lengths(stage_lengths)
  for name, values in (('server_lrs', server_lrs), ('betas', betas), ('nus', nus)):
    if len(values) != len(lengths):
      raise ValueError(
        f'{name} has {len(values)} entries but stage_lengths has '
        f'{len(lengths)}; give one per stage.'
      )
  for s in range(len(lengths)):
    checks.positive(f'server_lrs[{s}]', server_lrs[s])
    checks.in_range(f'betas[{s}]', betas[s], 0.0, 1.0, high_open=True)
    checks.in_range(f'nus[{s}]', nus[s], 0.0, 1.0)
  return fedgm_server(
    stagewise_constant(server_lrs, lengths),
    stagewise_constant(betas, lengths),
    stagewise_constant(nus, lengths),
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )


def server_optimizer(
  name: str,
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
  """A FedOPT ServerOPT by name (Reddi et al. 2021 symbols).

  ``convention='optax'`` (default) uses optax's transforms:

  * 'sgd': ``optax.sgd(eta)`` (FedSGD; beta1, beta2, tau unused).
  * 'adam': ``optax.adam(eta, b1=beta1, b2=beta2, eps=tau)`` (bias-corrected; Reddi's
    Alg. 2 omits the bias correction).
  * 'yogi': ``optax.yogi(eta, b1=beta1, b2=beta2, eps=tau)`` (bias-corrected).
  * 'amsgrad': ``optax.amsgrad(eta, b1=beta1, b2=beta2, eps=tau)``.
  * 'adagrad': ``optax.adagrad(eta, initial_accumulator_value=0, eps=tau**2)``, i.e.
    ``g / sqrt(sum g^2 + tau^2)``; no first moment (beta1, beta2 unused).

  ``convention='alg2'`` is Reddi et al.'s Alg. 2 as written (:mod:`afl_jax.servers.adaptive`)
  for 'adagrad', 'yogi' and 'adam' ('sgd' is the same in both): first moment with beta1,
  ``v_{-1} = tau^2`` (or ``initial_accumulator``), ``eta m_t / (sqrt(v_t) + tau)``, no
  bias correction; ``bias_correction``, ``bias_correction_offset`` and ``tau_placement``
  select the variants (they need ``convention='alg2'``).
  """
  checks.one_of('server_optimizer', name, OPTIMIZERS)
  checks.one_of('convention', convention, CONVENTIONS)
  checks.positive('server_lr', server_lr)
  checks.in_range('beta1', beta1, 0.0, 1.0, high_open=True)
  checks.in_range('beta2', beta2, 0.0, 1.0, high_open=True)
  checks.positive('tau', tau)
  if convention == 'optax':
    variants = dict(
      bias_correction=(bias_correction, False),
      bias_correction_offset=(bias_correction_offset, 1),
      tau_placement=(tau_placement, 'outside'),
      initial_accumulator=(initial_accumulator, None),
    )
    for field, (value, default) in variants.items():
      if value != default:
        raise ValueError(
          f"{field}={value!r} selects a variant of Reddi et al.'s Alg. 2: pass "
          f"convention='alg2' with it (or leave {field} at {default!r})."
        )
  if name == 'sgd':
    return optax.sgd(server_lr)
  if convention == 'alg2':
    if name == 'amsgrad':
      raise ValueError(
        "convention='alg2' covers 'adagrad', 'yogi' and 'adam' (Reddi et al. Alg. 2); "
        "'amsgrad' is optax's only: pass convention='optax'."
      )
    return optax.chain(
      adaptive.scale_by_alg2(
        name,
        beta1=beta1,
        beta2=beta2,
        tau=tau,
        bias_correction=bias_correction,
        bias_correction_offset=bias_correction_offset,
        tau_placement=tau_placement,
        initial_accumulator=initial_accumulator,
      ),
      optax.scale_by_learning_rate(server_lr),
    )
  if name == 'adagrad':
    return optax.adagrad(server_lr, initial_accumulator_value=0.0, eps=tau**2)
  factory = {'adam': optax.adam, 'yogi': optax.yogi, 'amsgrad': optax.amsgrad}[name]
  return factory(server_lr, b1=beta1, b2=beta2, eps=tau)


def fedopt(
  name: str = 'adam',
  server_lr: ScalarOrSchedule = 0.01,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
  **options: Any,
) -> ServerRule:
  """FedOPT's server: :func:`server_optimizer` (``name``, ``server_lr`` and its keyword
  ``options``: betas, tau, convention...) applied to the mean pseudo-gradient."""
  return optimizer_server(
    server_optimizer(name, server_lr, **options),
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )
