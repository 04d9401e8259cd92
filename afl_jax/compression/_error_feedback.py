"""Error feedback (EF) around any compressor.

Algorithm 1 and eqs. (8)-(9) of Yang, Hou, Wu, "Convergence Analysis of
Asynchronous Federated Learning with Gradient Compression for Non-Convex
Optimization": a participating client sends

.. math::
  \\widehat\\Delta = C(\\Delta + e), \\qquad e \\leftarrow e + \\Delta - \\widehat\\Delta,

with ``e`` initialized to zero.  While a client is absent its ``e`` is frozen
(Alg. 1 line 16); that is the engine's job (it only scatters the new state of
arriving clients).  Over any sequence of participations the sent messages
telescope: ``sum_t sent_t + e_T = sum_t Delta_t`` (with ``e_0 = 0``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.compression._base import Compressor, PRNGKey, Updates


class ErrorFeedbackState(NamedTuple):
  residual: Updates  # e, same tree/shapes/dtypes as the updates
  inner: Any  # state of the wrapped compressor


def error_feedback(compressor: Compressor) -> Compressor:
  """Wraps ``compressor`` with error feedback (eqs. 8-9).

  Args:
    compressor: any :class:`Compressor` (biased or not, stateful or not).

  Returns:
    A :class:`Compressor` whose state is ``ErrorFeedbackState(residual, inner)``;
    the bits are those of the wrapped compressor (the residual never leaves the
    client).  With :func:`identity` the message is ``Delta`` and ``e`` stays 0.
  """

  def init(updates: Updates) -> ErrorFeedbackState:
    residual = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), updates)
    return ErrorFeedbackState(residual=residual, inner=compressor.init(updates))

  def compress(
    updates: Updates, state: ErrorFeedbackState, key: PRNGKey
  ) -> tuple[Updates, ErrorFeedbackState, jax.Array]:
    corrected = jax.tree.map(lambda u, e: (u + e).astype(u.dtype), updates, state.residual)
    sent, inner, bits = compressor.compress(corrected, state.inner, key)
    residual = jax.tree.map(lambda c, m: (c - m).astype(c.dtype), corrected, sent)
    return sent, ErrorFeedbackState(residual=residual, inner=inner), bits

  return Compressor(init=init, compress=compress)
