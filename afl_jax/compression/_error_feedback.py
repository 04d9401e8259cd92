"""Error feedback around any compressor (Yang, Hou, Wu, Alg. 1, eqs. (8)-(9);
docs/algorithms/asynfl.md, "EF")."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.compression._base import Compressor, PRNGKey, Updates


class ErrorFeedbackState(NamedTuple):
  residual: Updates  # e, same tree/shapes/dtypes as the updates
  inner: Any  # state of the wrapped compressor


def error_feedback(compressor: Compressor) -> Compressor:
  """``compressor`` with error feedback, state ``ErrorFeedbackState(residual, inner)``."""

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
