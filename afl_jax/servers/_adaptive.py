"""FedAdagrad, FedYogi and FedAdam as written in Reddi et al. 2021, Alg. 2.

Reddi, Charles, Zaheer, Garrett, Rush, Konecny, Kumar, McMahan, "Adaptive Federated
Optimization", ICLR 2021, Algorithm 2: the first moment ``m_t``, the second moment
``v_t`` of FedAdagrad, FedYogi or FedAdam, and ``x_{t+1} = x_t + eta m_t / (sqrt(v_t) +
tau)`` with ``v_{-1} = tau^2``, t counting the server steps that had arrivals; with our
``Delta_t = x_start - x_local`` the step reads ``x_t - eta m_t / (...)``. Equations,
and the variants (``bias_correction`` with ``bias_correction_offset``,
``tau_placement='inside'``, ``initial_accumulator``; all off by default), in
(docs/algorithms/baselines.md, "FedOPT: Reddi et al. 2021, Alg. 2 as written").

A step without arrivals changes nothing (the server wraps the update in
:func:`afl_jax.core.types.unchanged_if_no_arrival`), so it does not advance t either.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax.core import checks, tree

RULES = ('adagrad', 'yogi', 'adam')
TAU_PLACEMENTS = ('outside', 'inside')


def moments(beta1: float, beta2: float, mu: Any, nu: Any, g: Any) -> tuple[Any, Any]:
  """Adam's moments ``m_t = beta1 m + (1 - beta1) g``, ``v_t = beta2 v + (1 - beta2) g^2``.

  No bias correction and no dtype casts: FADAS's and FedAC's server steps
  (:mod:`afl_jax.servers.fadas`, :mod:`afl_jax.servers.fedac`) build on it.
  """
  mu = jax.tree.map(lambda m, gi: beta1 * m + (1 - beta1) * gi, mu, g)
  nu = jax.tree.map(lambda v, gi: beta2 * v + (1 - beta2) * gi * gi, nu, g)
  return mu, nu


class Alg2State(NamedTuple):
  count: jax.Array  # int32 []: server updates so far (t)
  mu: Any  # m_{t-1}
  nu: Any  # v_{t-1}


def scale_by_alg2(
  rule: str,
  *,
  beta1: float = 0.9,
  beta2: float = 0.99,
  tau: float = 1e-3,
  bias_correction: bool = False,
  bias_correction_offset: int = 1,
  tau_placement: str = 'outside',
  initial_accumulator: float | None = None,
) -> optax.GradientTransformation:
  """Alg. 2's direction ``m_t / (sqrt(v_t) + tau)`` (times the bias correction, if on).

  Chain it with ``optax.scale_by_learning_rate(eta)`` for the step.

  Args:
    rule: 'adagrad', 'yogi' or 'adam' (how v is updated).
    beta1: first-moment decay, in [0, 1) (Flower's FedAdagrad uses 0).
    beta2: second-moment decay, in [0, 1) (unused by 'adagrad').
    tau: the adaptivity, > 0.
    bias_correction: scale by ``sqrt(1 - beta2^(t+k)) / (1 - beta1^(t+k))`` (not with
      'adagrad').
    bias_correction_offset: k >= 1 above.
    tau_placement: 'outside' (``sqrt(v) + tau``, the paper) or 'inside'
      (``sqrt(v + tau^2)``).
    initial_accumulator: v_{-1}; None (default) is ``tau^2``, the paper's smallest
      admissible value; 0 is Flower's.
  """
  checks.one_of('rule', rule, RULES)
  checks.one_of('tau_placement', tau_placement, TAU_PLACEMENTS)
  if not isinstance(bias_correction, bool):
    raise ValueError(f'bias_correction must be True or False; got {bias_correction!r}.')
  if bias_correction and rule == 'adagrad':
    raise ValueError(
      "bias_correction applies to 'adam' and 'yogi' only: FedAdagrad's v is a sum, not an "
      'average; pass bias_correction=False.'
    )
  offset = checks.positive_int('bias_correction_offset', bias_correction_offset)
  checks.in_range('beta1', beta1, 0.0, 1.0, high_open=True)
  checks.in_range('beta2', beta2, 0.0, 1.0, high_open=True)
  checks.positive('tau', tau)
  if initial_accumulator is not None:
    checks.in_range('initial_accumulator', initial_accumulator, 0.0, float('inf'))
  v0 = tau**2 if initial_accumulator is None else initial_accumulator

  def init(params):
    mu = tree.zeros_like(params)
    nu = jax.tree.map(lambda p: jnp.full_like(p, v0), params)
    return Alg2State(jnp.zeros([], jnp.int32), mu, nu)

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
        power = (state.count + offset).astype(m.dtype)
        out = out * (jnp.sqrt(1 - jnp.power(beta2, power)) / (1 - jnp.power(beta1, power)))
      return out.astype(m.dtype)

    out = jax.tree.map(direction, mu, nu)
    return out, Alg2State(state.count + 1, mu, nu)

  return optax.GradientTransformation(init, update)
