"""Top-k over the whole flattened message (Yang, Hou, Wu, Sec. III-B item (1);
docs/algorithms/asynfl.md, "Compressors")."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.compression._base import (
  COMPRESSORS,
  Compressor,
  PRNGKey,
  num_kept,
  stateless,
  top_k_bits,
)


def top_k_indices(flat: jax.Array, k: int) -> jax.Array:
  """Indices of the ``k`` largest ``|flat|``, ties broken by lowest index."""
  return jax.lax.top_k(jnp.abs(flat), k)[1]


@COMPRESSORS.register('top_k')
def top_k(fraction: float = 0.03) -> Compressor:
  """Top-k keeping ``fraction`` of the coordinates (at least 1)."""

  def compress(flat: jax.Array, key: PRNGKey) -> tuple[jax.Array, int]:
    del key
    k = num_kept(fraction, flat.size)
    idx = top_k_indices(flat, k)
    return jnp.zeros_like(flat).at[idx].set(flat[idx]), top_k_bits(flat.size, k)

  return stateless(compress, flat=True)
