"""FedNova's normalized averaging for local SGD (Wang, Liu, Liang, Joshi, Poor, NeurIPS
2020, Sec. 5): ``x <- x - eta_g tau_eff sum_i p_i Delta_i / tau_i``, ``tau_eff =
sum_i p_i tau_i``, as a per-message scale ``tau_eff / tau_i`` (:func:`nova_scales`) put
in front of an averaging server (:func:`nova`) or FedFa's window
(docs/algorithms/fedfa.md, "Equations as implemented").
"""

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
  """Row m of every stacked leaf times ``scales[m]``, keeping the leaf's dtype."""
  return jax.tree.map(
    lambda x: scales.astype(x.dtype).reshape((-1,) + (1,) * (x.ndim - 1)) * x, messages
  )


@checks.validated()
def nova(inner: ServerRule, *, weighting: str = 'uniform') -> ServerRule:
  """``inner`` (an averaging server of the same ``weighting``) on the messages scaled by
  :func:`nova_scales`; adds the metric ``tau_eff``."""
  examples = weighting == 'examples'

  def update(state, messages, arrivals: Arrivals, key):
    weights = _weighting.row_weights(arrivals, 'arrivals', None, examples)
    scales = nova_scales(arrivals.num_steps, arrivals.mask, weights)
    state, metrics = inner.update(state, scale_messages(messages, scales), arrivals, key)
    return state, {**metrics, 'tau_eff': jnp.sum(arrivals.num_steps * weights)}

  return inner._replace(update=update)
