"""QSGD (Alistarh et al., NeurIPS 2017), alone and on the Top-k values (Yang, Hou, Wu, Sec. III-B
item (3); docs/algorithms/asynfl.md, "Compressors")."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from afl_jax.compression._base import (
  COMPRESSORS,
  Compressor,
  PRNGKey,
  num_kept,
  qsgd_bits,
  stateless,
  top_k_qsgd_bits,
)
from afl_jax.compression._sparse import top_k_indices


def quantize(x: jax.Array, s: int, key: PRNGKey) -> jax.Array:
  """``Q_s(x)`` of a 1-D array with its own l2 norm; ``Q_s(0) = 0``."""
  norm = jnp.sqrt(jnp.sum(jnp.square(x)))
  safe = jnp.where(norm > 0, norm, jnp.ones_like(norm))
  r = jnp.minimum(jnp.abs(x) * (s / safe), s)  # in [0, s]; 0 when norm == 0
  low = jnp.floor(r)
  u = jax.random.uniform(key, x.shape, dtype=x.dtype)
  level = low + (u < (r - low)).astype(x.dtype)
  return (jnp.sign(x) * level * (norm / s)).astype(x.dtype)


@COMPRESSORS.register('qsgd')
def qsgd(bits: int = 4) -> Compressor:
  """QSGD on the whole flattened pytree."""
  s = 2 ** (bits - 1) - 1
  return stateless(
    lambda flat, key: (quantize(flat, s, key), qsgd_bits(flat.size, bits)), flat=True
  )


@COMPRESSORS.register('top_k_qsgd')
def top_k_qsgd(fraction: float = 0.03, bits: int = 4, scaled: bool = False) -> Compressor:
  """``Q_s(Top_k(x))``; ``scaled`` divides by ``1 + beta_{k,s}``
  (docs/algorithms/asynfl.md, "EF")."""
  s = 2 ** (bits - 1) - 1

  def compress(flat: jax.Array, key: PRNGKey) -> tuple[jax.Array, int]:
    k = num_kept(fraction, flat.size)
    idx = top_k_indices(flat, k)
    values = quantize(flat[idx], s, key)
    if scaled:
      values = values / (1.0 + min(k / s**2, math.sqrt(k) / s))
    return jnp.zeros_like(flat).at[idx].set(values), top_k_qsgd_bits(flat.size, k, bits)

  return stateless(compress, flat=True)
