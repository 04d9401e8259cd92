"""Message compressors of ONE client's upload (Yang, Hou, Wu, Sec. III-B, Alg. 1; QSGD of Alistarh
et al. 2017) and their bit accounting (docs/algorithms/asynfl.md, "Compressors")."""
# ruff: noqa: F401 (re-exports, listed in __all__)

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from afl_jax import checks
from afl_jax.core import tree
from afl_jax.core.tree import VALUE_BITS, dense_bits
from afl_jax.registry import Registry

# The ranges of the settings several compressors share (also AsynFLC's hyperparameters).
PARAMS: dict[str, checks.Spec] = {
  'fraction': checks.real(0.0, 1.0, low_open=True),  # k/d
  'bits': checks.integer(2, 32),  # b, bits per coordinate including the sign
  'scaled': checks.boolean(),
}
COMPRESSORS = Registry(
  'compressor', section='compressor', name_field='compressor.kind', shared=PARAMS
)


class EmptyState(NamedTuple):
  pass


class Compressor(NamedTuple):
  """Optax-style: ``init(updates) -> state``, ``compress(updates, state, key) -> (message, state,
  bits)``, bits a float32 scalar."""

  init: Callable[[Any], Any]
  compress: Callable[[Any, Any, jax.Array], tuple[Any, Any, jax.Array]]


def index_bits(d: int) -> int:  # ceil(log2 d)
  return (d - 1).bit_length()


def num_kept(fraction: float, d: int) -> int:
  """Top-k's ``k = clip(ceil(fraction d), 1, d)`` (1e-12 slack: ``fraction=0.3, d=10`` keeps 3)."""
  k = math.ceil(fraction * d * (1.0 - 1e-12))
  return min(d, max(1, k))


# Bits sent for a message of d scalars: dense; k values and their indices (Top-k).
identity_bits = lambda d: VALUE_BITS * d
top_k_bits = lambda d, k: k * (VALUE_BITS + index_bits(d))


def stateless(fn: Callable[[Any, jax.Array], tuple[Any, int]], *, flat: bool = False) -> Compressor:
  """A stateless :class:`Compressor` from ``fn(x, key) -> (compressed, static bits)``; ``flat``:
  ``x`` is the pytree raveled."""

  def compress(updates, state, key):
    vector, unravel = ravel_pytree(updates) if flat else (updates, lambda x: x)
    out, bits = fn(vector, key)
    return unravel(out), state, jnp.asarray(float(bits), dtype=jnp.float32)

  return Compressor(init=lambda updates: EmptyState(), compress=compress)


@COMPRESSORS.register('identity')
def identity() -> Compressor:
  return stateless(lambda updates, key: (updates, identity_bits(tree.size(updates))))


def paper_sign(x: jax.Array) -> jax.Array:
  """Sec. III-B item (2): ``Sign(x)_i = +1`` for ``x_i >= 0``, else -1."""
  return jnp.where(x >= 0, jnp.ones_like(x), -jnp.ones_like(x))


@COMPRESSORS.register('sign')
def sign(scaled: bool = False) -> Compressor:
  """Sign on library messages ``m = -Delta``: ``-alpha Sign(-m)``, ``d`` bits (+32 if
  ``scaled``)."""

  def compress(updates, key):
    del key
    d = tree.size(updates)
    signs = jax.tree.map(lambda m: -paper_sign(-m), updates)  # -Sign(Delta), Delta = -m
    if scaled:
      leaves = jax.tree_util.tree_leaves(updates)
      l1 = sum(jnp.sum(jnp.abs(x).astype(jnp.result_type(*leaves))) for x in leaves)
      signs = jax.tree.map(lambda s: (l1 / d * s).astype(s.dtype), signs)
    return signs, d + (VALUE_BITS if scaled else 0)  # d signs (and the scale)

  return stateless(compress)


def _largest(flat: jax.Array, fraction: float) -> tuple[int, jax.Array]:
  k = num_kept(fraction, flat.size)
  return k, jax.lax.top_k(jnp.abs(flat), k)[1]  # the k largest |x_i|, ties to the lowest index


@COMPRESSORS.register('top_k')
def top_k(fraction: float = 0.03) -> Compressor:
  """Top-k (Sec. III-B item (1)) keeping ``fraction`` of the coordinates (at least 1)."""

  def compress(flat, key):
    del key
    k, idx = _largest(flat, fraction)
    return jnp.zeros_like(flat).at[idx].set(flat[idx]), top_k_bits(flat.size, k)

  return stateless(compress, flat=True)


def quantize(x: jax.Array, s: int, key: jax.Array) -> jax.Array:
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
  """QSGD (Alistarh et al., NeurIPS 2017) on the whole flattened pytree."""
  s = 2 ** (bits - 1) - 1
  return stateless(  # the norm and d levels of b bits
    lambda flat, key: (quantize(flat, s, key), VALUE_BITS + flat.size * bits), flat=True
  )


@COMPRESSORS.register('top_k_qsgd')
def top_k_qsgd(fraction: float = 0.03, bits: int = 4, scaled: bool = False) -> Compressor:
  """``Q_s(Top_k(x))`` (Sec. III-B item (3)); ``scaled`` divides by ``1 + beta_{k,s}``
  (docs/algorithms/asynfl.md, "EF")."""
  s = 2 ** (bits - 1) - 1

  def compress(flat, key):
    k, idx = _largest(flat, fraction)
    values = quantize(flat[idx], s, key)
    if scaled:
      values = values / (1.0 + min(k / s**2, math.sqrt(k) / s))
    bits_sent = VALUE_BITS + k * (bits + index_bits(flat.size))  # the norm, k levels, indices
    return jnp.zeros_like(flat).at[idx].set(values), bits_sent

  return stateless(compress, flat=True)


class ErrorFeedbackState(NamedTuple):
  residual: Any  # e, like the updates
  inner: Any  # the wrapped compressor's state


def error_feedback(compressor: Compressor) -> Compressor:
  """``compressor`` with error feedback (Alg. 1, eqs. (8)-(9))."""

  def init(updates):
    residual = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), updates)
    return ErrorFeedbackState(residual=residual, inner=compressor.init(updates))

  def compress(updates, state, key):
    corrected = jax.tree.map(lambda u, e: (u + e).astype(u.dtype), updates, state.residual)
    sent, inner, bits = compressor.compress(corrected, state.inner, key)
    residual = jax.tree.map(lambda c, m: (c - m).astype(c.dtype), corrected, sent)
    return sent, ErrorFeedbackState(residual=residual, inner=inner), bits

  return Compressor(init=init, compress=compress)


make, names, settings, register = COMPRESSORS.verbs()

__all__ = (
  'COMPRESSORS VALUE_BITS Compressor EmptyState ErrorFeedbackState dense_bits error_feedback '
  'identity identity_bits index_bits make names num_kept paper_sign qsgd register settings sign '
  'top_k top_k_bits top_k_qsgd'
).split()
