"""QSGD stochastic quantization, alone and on the Top-k values.

QSGD is the s-level stochastic quantizer of Alistarh, Grubic, Li, Tomioka,
Vojnovic, "QSGD: Communication-Efficient SGD via Gradient Quantization and
Encoding" (NeurIPS 2017):

.. math::
  Q_s(x)_i = \\|x\\|_2 \\, \\mathrm{sgn}(x_i) \\, \\xi_i / s, \\qquad
  \\xi_i = l_i + \\mathrm{Bernoulli}(r_i - l_i), \\;
  r_i = s |x_i| / \\|x\\|_2, \\; l_i = \\lfloor r_i \\rfloor,

which is unbiased, with ``E||Q_s(x) - x||^2 <= min(d/s^2, sqrt(d)/s) ||x||^2``, and
``Q_s(0) = 0``.  Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated
Learning with Gradient Compression for Non-Convex Optimization", Sec. III-B item
(3), compose it with Top-k: ``Q_s(Top_k(x))`` quantizes the ``k`` kept values
with the l2 norm of the kept vector (a biased compressor with
``gamma = k / (d (1 + beta_{k,s}))``).

Bits: ``b`` bits per coordinate INCLUDING the sign, so ``s = 2^(b-1) - 1`` levels
(b=2 -> s=1, ternary; b=8 -> s=127); plus one 32-bit norm.  Given ``levels=s``
instead, ``b = ceil(log2(s + 1)) + 1``.  The whole pytree is quantized as one
flattened vector (one norm per message).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from afl_jax.compression._base import (
  Compressor,
  PRNGKey,
  qsgd_bits,
  stateless,
  top_k_qsgd_bits,
)
from afl_jax.compression._sparse import resolve_k, top_k_indices, validate_fraction_or_k

_MAX_BITS = 32


def resolve_levels(bits: int | None, levels: int | None, where: str) -> tuple[int, int]:
  """Config check; returns ``(b, s)`` from exactly one of ``bits`` / ``levels``."""
  if (bits is None) == (levels is None):
    raise ValueError(
      f'{where}: give exactly one of bits (per coordinate, sign included) or levels, '
      f'got bits={bits}, levels={levels}'
    )
  if bits is not None:
    if isinstance(bits, bool) or int(bits) != bits or not 2 <= bits <= _MAX_BITS:
      raise ValueError(
        f'{where}: bits must be an integer in [2, {_MAX_BITS}] (b bits per coordinate '
        f'including the sign, s = 2^(b-1) - 1 >= 1), got bits={bits!r}'
      )
    b = int(bits)
    return b, 2 ** (b - 1) - 1
  if (
    isinstance(levels, bool) or int(levels) != levels or not 1 <= levels <= 2 ** (_MAX_BITS - 1) - 1
  ):
    raise ValueError(
      f'{where}: levels must be an integer in [1, {2 ** (_MAX_BITS - 1) - 1}], '
      f'got levels={levels!r}'
    )
  s = int(levels)
  return s.bit_length() + 1, s


def quantize(x: jax.Array, s: int, key: PRNGKey) -> jax.Array:
  """``Q_s(x)`` of a 1-D array with its own l2 norm; ``Q_s(0) = 0``."""
  norm = jnp.sqrt(jnp.sum(jnp.square(x)))
  safe = jnp.where(norm > 0, norm, jnp.ones_like(norm))
  r = jnp.minimum(jnp.abs(x) * (s / safe), s)  # in [0, s]; 0 when norm == 0
  low = jnp.floor(r)
  u = jax.random.uniform(key, x.shape, dtype=x.dtype)
  level = low + (u < (r - low)).astype(x.dtype)
  return (jnp.sign(x) * level * (norm / s)).astype(x.dtype)


def qsgd(bits: int | None = None, levels: int | None = None) -> Compressor:
  """QSGD (Alistarh et al. 2017) on the whole flattened pytree.

  Args:
    bits: ``b >= 2`` bits per coordinate including the sign; ``s = 2^(b-1) - 1``.
    levels: alternatively the number of levels ``s >= 1``.

  Returns:
    A stateless, unbiased :class:`Compressor`; bits ``32 + d b``.
  """
  b, s = resolve_levels(bits, levels, 'qsgd')
  return stateless(lambda flat, key: (quantize(flat, s, key), qsgd_bits(flat.size, b)), flat=True)


def top_k_qsgd(
  fraction: float | None = None,
  bits: int | None = None,
  *,
  k: int | None = None,
  levels: int | None = None,
  scaled: bool = False,
) -> Compressor:
  """``Q_s(Top_k(x))``: QSGD on the ``k`` kept values (norm of the kept vector).

  Top-k uses the rounding and lowest-index tie-break of :func:`top_k`. The paper
  quotes the contraction factor ``gamma = k / (d (1 + beta_{k,s}))``,
  ``beta_{k,s} = min(k / s^2, sqrt(k) / s)`` (Basu et al., "Qsparse-local-SGD", 2019),
  which holds for the *scaled* operator ``Q_s(Top_k(x)) / (1 + beta_{k,s})``;
  ``scaled=True`` applies that factor (the unscaled operator can expand: with
  k = 5977, s = 7 its error exceeds ||x||^2, and error feedback then diverges).

  Args:
    fraction: fraction of coordinates kept (or ``k``, keyword-only).
    bits: bits per kept value including the sign (or ``levels``, keyword-only).
    k: explicit number of kept coordinates.
    levels: explicit number of levels ``s``.
    scaled: divide by ``1 + beta_{k,s}`` (a contraction; the scale is known to the
      server, so no bits are added).

  Returns:
    A stateless :class:`Compressor`; bits ``32 + k (b + ceil(log2 d))``.
  """
  validate_fraction_or_k(fraction, k, 'top_k_qsgd')
  b, s = resolve_levels(bits, levels, 'top_k_qsgd')

  def compress(flat: jax.Array, key: PRNGKey) -> tuple[jax.Array, int]:
    d = flat.size
    kk = resolve_k(fraction, k, d)
    idx = top_k_indices(flat, kk)
    values = quantize(flat[idx], s, key)
    if scaled:
      values = values / (1.0 + min(kk / s**2, math.sqrt(kk) / s))
    return jnp.zeros_like(flat).at[idx].set(values), top_k_qsgd_bits(d, kk, b)

  return stateless(compress, flat=True)
