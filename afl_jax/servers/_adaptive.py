"""FedAdagrad, FedYogi and FedAdam as written in Reddi et al., ICLR 2021, Alg. 2
(docs/algorithms/baselines.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax.core import checks, tree

RULES = ('adagrad', 'yogi', 'adam')
TAU_PLACEMENTS = ('outside', 'inside')


def moments(beta1: float, beta2: float, mu: Any, nu: Any, g: Any) -> tuple[Any, Any]:
  """Adam's first and second moments without bias correction."""
  mu = jax.tree.map(lambda m, gi: beta1 * m + (1 - beta1) * gi, mu, g)
  nu = jax.tree.map(lambda v, gi: beta2 * v + (1 - beta2) * gi * gi, nu, g)
  return mu, nu


class Alg2State(NamedTuple):
  count: jax.Array  # int32 []: server updates so far (t)
  mu: Any  # m_{t-1}
  nu: Any  # v_{t-1}


# The options of Alg. 2 beyond (beta1, beta2, tau), declared once for every rule taking them.
ALG2 = {
  'tau': checks.POSITIVE,
  'bias_correction': checks.boolean(),
  'bias_correction_offset': checks.integer(1),
  'tau_placement': checks.choice(TAU_PLACEMENTS),
  'initial_accumulator': checks.NON_NEGATIVE,
}


@checks.validated(rule=checks.choice(RULES), **ALG2)
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
  """Alg. 2's direction ``m_t / (sqrt(v_t) + tau)`` for ``rule``; chain it with a learning rate."""
  if bias_correction and rule == 'adagrad':
    raise ValueError(
      "bias_correction applies to 'adam' and 'yogi' only: FedAdagrad's v is a sum, not an "
      'average; pass bias_correction=False.'
    )
  v0 = tau**2 if initial_accumulator is None else initial_accumulator

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
