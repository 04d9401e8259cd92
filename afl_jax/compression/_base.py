"""The compressor type, its registry and the bit accounting (docs/algorithms/asynfl.md,
"Compressors"): a compressor transforms ONE client's upload, vmapped over the arrivals with its
state scattered by client id (Yang, Hou, Wu, Alg. 1 lines 13, 16)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from afl_jax import checks
from afl_jax.core import tree
from afl_jax.core.tree import VALUE_BITS as VALUE_BITS
from afl_jax.core.tree import dense_bits as dense_bits
from afl_jax.registry import Registry

Updates = Any  # a pytree of arrays: the message of one client
CompressorState = Any  # a pytree (possibly empty) holding one client's state
PRNGKey = jax.Array


# The ranges of the settings several compressors share (also AsynFLC's hyperparameters).
PARAMS: dict[str, checks.Spec] = {
  'fraction': checks.real(0.0, 1.0, low_open=True),  # k/d
  'bits': checks.integer(2, 32),  # b, bits per coordinate including the sign
  'scaled': checks.boolean(),
}
# Compressors by name: a config's ``compressor.kind`` and its settings; a user registers
# their own with ``@COMPRESSORS.register('name')``.
COMPRESSORS = Registry(
  'compressor', section='compressor', name_field='compressor.kind', shared=PARAMS
)


class EmptyState(NamedTuple):
  """State of a stateless compressor (an empty pytree)."""


def init_empty(updates: Updates) -> EmptyState:
  del updates
  return EmptyState()


class Compressor(NamedTuple):
  """Optax-style: ``init(updates) -> state``, ``compress(updates, state, key) -> (message, state,
  bits)``, bits a float32 scalar."""

  init: Callable[[Updates], CompressorState]
  compress: Callable[
    [Updates, CompressorState, PRNGKey], tuple[Updates, CompressorState, jax.Array]
  ]


tree_size = tree.size  # d, the scalars of a message (static)


def index_bits(d: int) -> int:
  """``ceil(log2 d)``."""
  return (d - 1).bit_length()


def num_kept(fraction: float, d: int) -> int:
  """Top-k's ``k = clip(ceil(fraction d), 1, d)``, at least ``fraction`` of the coordinates
  (a 1e-12 relative slack absorbs round-off: ``fraction=0.3, d=10`` keeps 3)."""
  k = math.ceil(fraction * d * (1.0 - 1e-12))
  return min(d, max(1, k))


def identity_bits(d: int) -> int:
  return VALUE_BITS * d


def top_k_bits(d: int, k: int) -> int:
  return k * (VALUE_BITS + index_bits(d))


def sign_bits(d: int, scaled: bool = False) -> int:
  return d + (VALUE_BITS if scaled else 0)


def qsgd_bits(d: int, bits: int) -> int:
  return VALUE_BITS + d * bits


def top_k_qsgd_bits(d: int, k: int, bits: int) -> int:
  return VALUE_BITS + k * (bits + index_bits(d))


def count_bytes(bits: Any, mask: Any = None) -> float:
  """``sum(bits[mask]) / 8`` in float64, padding left out."""
  b = np.asarray(bits, dtype=np.float64)
  if mask is not None:
    b = np.where(np.asarray(mask, dtype=bool), b, 0.0)
  return float(b.sum() / 8.0)


def bits_scalar(n: int) -> jax.Array:
  return jnp.asarray(float(n), dtype=jnp.float32)


def stateless(fn: Callable[[Any, PRNGKey], tuple[Any, int]], *, flat: bool = False) -> Compressor:
  """A stateless :class:`Compressor` from ``fn(x, key) -> (compressed, static bits)``; ``flat``:
  ``x`` is the pytree raveled."""

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
