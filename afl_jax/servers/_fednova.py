r"""FedNova's normalized averaging for plain local SGD.

Wang, Liu, Liang, Joshi, Poor, "Tackling the Objective Inconsistency Problem in
Heterogeneous Federated Optimization", NeurIPS 2020 (Sec. 4, the generalized update
rule; Sec. 5, FedNova). With vanilla SGD ``||a_i||_1 = tau_i`` (the client's local
steps), so in our sign convention

.. math::  x \leftarrow x - \eta_g\, \tau_{eff}\, \frac{1}{|S|}\sum_{i \in S}
           \frac{\Delta_i}{\tau_i},\qquad
           \tau_{eff} = \frac{1}{|S|}\sum_{i \in S} \tau_i,

with weights ``1/|S|`` (``weighting='uniform'``) or ``n_i / sum_{j in S} n_j``
(``'examples'``, the paper's ``p_i = n_i / n``): (docs/algorithms/fedfa.md,
"Equations as implemented"). The normalization is a per-message scale
``tau_eff / tau_i`` (:func:`nova_scales`); :func:`nova` puts it in front of any server
that averages a step's messages, and FedFa applies it to its window
(``afl_jax.servers.fedfa``, ``message_scales``). With equal local steps every scale is
1 and FedNova is its base rule unchanged.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.core.types import Arrivals, ServerRule
from afl_jax.servers import weighting as weighting_lib


def nova_scales(
  num_steps: jax.Array, mask: jax.Array, weights: jax.Array | None = None
) -> jax.Array:
  """``tau_eff / tau_i`` for each valid row, 0 for padding.

  Args:
    num_steps: int[M], tau_i, the local SGD steps behind each message (>= 1 where valid).
    mask: bool[M], which rows are aggregated.
    weights: optional float[M] ``p_i`` of the valid rows (summing to 1, 0 on
      padding); default uniform over the valid rows.

  Returns:
    float[M] scales (float64 when x64 is enabled); ``tau_eff = sum_i p_i tau_i``
    over the valid rows (the mean of ``tau_i`` when uniform).
  """
  dtype = jnp.result_type(float)
  tau = num_steps.astype(dtype)
  valid = mask.astype(dtype)
  if weights is None:
    weights = valid / jnp.maximum(jnp.sum(valid), 1.0)
  tau_eff = jnp.sum(tau * weights.astype(dtype) * valid)
  return jnp.where(mask, tau_eff / jnp.maximum(tau, 1.0), 0.0)


def scale_messages(messages, scales: jax.Array):
  """Row m of every stacked leaf times ``scales[m]``, keeping the leaf's dtype."""

  def one(x):
    s = scales.astype(x.dtype).reshape((-1,) + (1,) * (x.ndim - 1))
    return s * x

  return jax.tree.map(one, messages)


def nova(inner: ServerRule, *, weighting: str = 'uniform') -> ServerRule:
  """FedNova normalization in front of an averaging server.

  Each valid message ``Delta_i`` becomes ``(tau_eff / tau_i) Delta_i`` (``tau_i`` =
  ``arrivals.num_steps``, ``tau_eff`` their mean over this step's valid arrivals),
  then ``inner`` runs unchanged. With ``inner`` = FedAvg's server this is FedNova;
  with FedBuff's, ``x <- x - eta_g * tau_eff * mean(Delta_i / tau_i)``.

  Args:
    inner: a server whose update averages the messages of a step, with the same
      ``weighting`` (FedNova's ``p_i``: uniform, or ``n_i / n`` as in Wang et al.).
    weighting: 'uniform' or 'examples' (:mod:`afl_jax.servers.weighting`).

  Returns:
    A server with ``inner``'s state, broadcast and params.
  """

  examples = weighting_lib.check(weighting)

  def update(state, messages, arrivals: Arrivals, key):
    weights = weighting_lib.row_weights(arrivals, 'arrivals', None, examples)
    scales = nova_scales(arrivals.num_steps, arrivals.mask, weights)
    state, metrics = inner.update(state, scale_messages(messages, scales), arrivals, key)
    tau_eff = jnp.sum(arrivals.num_steps * weights)
    return state, {**metrics, 'tau_eff': tau_eff}

  return inner._replace(update=update)
