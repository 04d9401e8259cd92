"""FedNova's normalized averaging (Wang et al., NeurIPS 2020, Sec. 5) as per-message scales
``tau_eff / tau_i`` (docs/algorithms/fedfa.md)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.core import checks
from afl_jax.core.types import Arrivals, ServerRule
from afl_jax.servers import _weighting


def nova_scales(
  num_steps: jax.Array, mask: jax.Array, weights: jax.Array | None = None
) -> jax.Array:
  """float[M] ``tau_eff / tau_i`` of the valid rows (0 on padding); ``weights`` p_i
  (default uniform over the valid rows)."""
  dtype = jnp.result_type(float)
  tau = num_steps.astype(dtype)
  valid = mask.astype(dtype)
  if weights is None:
    weights = valid / jnp.maximum(jnp.sum(valid), 1.0)
  tau_eff = jnp.sum(tau * weights.astype(dtype) * valid)
  return jnp.where(mask, tau_eff / jnp.maximum(tau, 1.0), 0.0)


def scale_messages(messages, scales: jax.Array):
  return jax.tree.map(
    lambda x: scales.astype(x.dtype).reshape((-1,) + (1,) * (x.ndim - 1)) * x, messages
  )


@checks.validated()
def nova(inner: ServerRule, *, weighting: str = 'uniform') -> ServerRule:
  """``inner`` on the messages scaled by :func:`nova_scales`, with the metric ``tau_eff``."""
  examples = weighting == 'examples'

  def update(state, messages, arrivals: Arrivals, key):
    weights = _weighting.row_weights(arrivals, 'arrivals', None, examples)
    scales = nova_scales(arrivals.num_steps, arrivals.mask, weights)
    state, metrics = inner.update(state, scale_messages(messages, scales), arrivals, key)
    return state, {**metrics, 'tau_eff': jnp.sum(arrivals.num_steps * weights)}

  return inner._replace(update=update)
