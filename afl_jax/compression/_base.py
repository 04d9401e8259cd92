"""Shared types and bit-accounting helpers for message compressors.

A compressor is a pure, jittable transform applied by ONE client to its upload
(a pseudo-gradient pytree).  The engine vmaps ``compress`` over the arriving
clients and gathers/scatters the per-client ``CompressorState`` by client id, so
a client's state (e.g. its error-feedback residual) is frozen while it is absent,
as required by Algorithm 1 (lines 13 and 16) of

  X. Yang, Y. Hou, B. Wu, "Convergence Analysis of Asynchronous Federated
  Learning with Gradient Compression for Non-Convex Optimization".

Bit accounting convention (used by every compressor in this package): a
transmitted real value (a kept coordinate, a norm, a scale) costs
``VALUE_BITS = 32`` bits whatever the in-memory dtype; a coordinate index into a
flattened vector of size ``d`` costs ``ceil(log2 d)`` bits; a sign costs 1 bit.
The bits of one message depend only on static shapes, so they are computed in
Python (exact integers, see the ``*_bits`` helpers) and returned by ``compress``
as a float32 scalar (exact up to 2**24 bits, and for any multiple of 32 up to
2**29; use the integer helpers for exact totals of very large models).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from afl_jax.core.tree import VALUE_BITS as VALUE_BITS
from afl_jax.core.tree import dense_bits as dense_bits

Updates = Any  # a pytree of arrays: the message of one client
CompressorState = Any  # a pytree (possibly empty) holding one client's state
PRNGKey = jax.Array


class EmptyState(NamedTuple):
  """State of a stateless compressor (an empty pytree)."""


def init_empty(updates: Updates) -> EmptyState:
  """``init`` of a stateless compressor."""
  del updates
  return EmptyState()


class Compressor(NamedTuple):
  """A message transform ``(init, compress)``, optax-style.

  Attributes:
    init: ``init(updates) -> state`` for ONE client; ``updates`` is a pytree with
      the shapes/dtypes of the messages (e.g. the model params).
    compress: ``compress(updates, state, key) -> (message, new_state, bits)`` where
      ``message`` is the decompressed message as the server sees it (same tree
      structure, shapes and dtypes as ``updates``) and ``bits`` is a float32 scalar,
      the number of bits the client uploads.
  """

  init: Callable[[Updates], CompressorState]
  compress: Callable[
    [Updates, CompressorState, PRNGKey], tuple[Updates, CompressorState, jax.Array]
  ]


def tree_size(tree: Updates) -> int:
  """Total number of scalar entries ``d`` of a pytree (static)."""
  return int(sum(math.prod(np.shape(leaf)) for leaf in jax.tree_util.tree_leaves(tree)))


def index_bits(d: int) -> int:
  """``ceil(log2 d)``: bits to address one coordinate of a length-``d`` vector."""
  if d < 1:
    raise ValueError(f'index_bits: d must be >= 1, got {d}')
  return (d - 1).bit_length()


def num_kept(fraction: float, d: int) -> int:
  """Number of coordinates kept by Top-k: ``k = clip(ceil(fraction * d), 1, d)``.

  ``ceil`` guarantees that at least ``fraction`` of the coordinates are kept; a
  relative slack of 1e-12 absorbs binary round-off of ``fraction * d`` (so
  ``fraction=0.3, d=10`` gives ``k=3``, not 4).
  """
  if d < 1:
    raise ValueError(f'num_kept: d must be >= 1, got {d}')
  k = math.ceil(fraction * d * (1.0 - 1e-12))
  return min(d, max(1, k))


def identity_bits(d: int) -> int:
  """Dense float message: ``32 d`` bits."""
  return VALUE_BITS * d


def top_k_bits(d: int, k: int) -> int:
  """Top-k: ``k`` values and ``k`` indices, ``32 k + k ceil(log2 d)`` bits."""
  return k * (VALUE_BITS + index_bits(d))


def sign_bits(d: int, scaled: bool = False) -> int:
  """Sign: one bit per coordinate, plus one 32-bit scale if ``scaled``."""
  return d + (VALUE_BITS if scaled else 0)


def qsgd_bits(d: int, bits: int) -> int:
  """QSGD: one 32-bit norm plus ``b`` bits per coordinate (sign included)."""
  return VALUE_BITS + d * bits


def top_k_qsgd_bits(d: int, k: int, bits: int) -> int:
  """QSGD on the Top-k values: ``32 + k (b + ceil(log2 d))`` bits."""
  return VALUE_BITS + k * (bits + index_bits(d))


def count_bytes(bits: Any, mask: Any = None) -> float:
  """Host-side total bytes of an array of per-message bit counts.

  Args:
    bits: bit counts, any shape (e.g. ``[T, M]`` stacked over a run).
    mask: optional boolean array broadcastable to ``bits``; False entries
      (padding, non-participants) are not counted.

  Returns:
    ``sum(bits[mask]) / 8`` as a Python float, accumulated in float64.
  """
  b = np.asarray(bits, dtype=np.float64)
  if mask is not None:
    b = np.where(np.asarray(mask, dtype=bool), b, 0.0)
  return float(b.sum() / 8.0)


def bits_scalar(n: int) -> jax.Array:
  """A static bit count as the float32 scalar returned by ``compress``."""
  return jnp.asarray(float(n), dtype=jnp.float32)


def stateless(fn: Callable[[Any, PRNGKey], tuple[Any, int]], *, flat: bool = False) -> Compressor:
  """A stateless :class:`Compressor` from ``fn(x, key) -> (compressed, bits)``.

  ``bits`` is the static bit count of the message; with ``flat=True``, ``x`` is the
  whole pytree flattened to one vector (``ravel_pytree``) and ``compressed`` is unraveled.
  """

  def compress(
    updates: Updates, state: EmptyState, key: PRNGKey
  ) -> tuple[Updates, EmptyState, jax.Array]:
    if not flat:
      out, bits = fn(updates, key)
      return out, state, bits_scalar(bits)
    vector, unravel = ravel_pytree(updates)
    out, bits = fn(vector, key)
    return unravel(out), state, bits_scalar(bits)

  return Compressor(init=init_empty, compress=compress)
