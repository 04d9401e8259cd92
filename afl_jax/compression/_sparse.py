"""Top-k sparsification over the whole flattened message.

Sec. III-B, item (1) of Yang, Hou, Wu, "Convergence Analysis of Asynchronous
Federated Learning with Gradient Compression for Non-Convex Optimization":
``Top_k(x)`` keeps the ``k`` entries of largest absolute value of the length-``d``
vector (all leaves of the pytree raveled together) and zeroes the rest; it
satisfies ``||Top_k(x) - x||^2 <= (1 - k/d) ||x||^2``.

Choices made here:

* ``k = clip(ceil(fraction * d), 1, d)`` (see :func:`num_kept`), or an explicit
  ``k`` (clipped to ``d``).
* Deterministic tie-break: among equal magnitudes the LOWEST flat index is kept
  first (``jax.lax.top_k`` guarantees "if two elements are equal, the
  lower-index element appears first"); the flat order is that of
  ``jax.flatten_util.ravel_pytree`` (leaves in ``jax.tree.leaves`` order, each
  row-major).
* Bits: ``k`` 32-bit values plus ``k`` indices of ``ceil(log2 d)`` bits.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from afl_jax.compression._base import (
  Compressor,
  PRNGKey,
  num_kept,
  stateless,
  top_k_bits,
)


def validate_fraction_or_k(fraction: float | None, k: int | None, where: str) -> None:
  """Config check: exactly one of ``fraction`` in (0, 1] or integer ``k >= 1``."""
  if (fraction is None) == (k is None):
    raise ValueError(f'{where}: give exactly one of fraction or k, got fraction={fraction}, k={k}')
  if fraction is not None:
    f = float(fraction)
    if not (math.isfinite(f) and 0.0 < f <= 1.0):
      raise ValueError(f'{where}: fraction must be in (0, 1], got {fraction!r}')
  else:
    if isinstance(k, bool) or int(k) != k or k < 1:
      raise ValueError(f'{where}: k must be an integer >= 1, got {k!r}')


def resolve_k(fraction: float | None, k: int | None, d: int) -> int:
  """The static number of kept coordinates for a message of size ``d``."""
  if k is not None:
    return min(int(k), d)
  return num_kept(float(fraction), d)


def top_k_indices(flat: jax.Array, k: int) -> jax.Array:
  """Indices of the ``k`` largest ``|flat|``, ties broken by lowest index."""
  _, idx = jax.lax.top_k(jnp.abs(flat), k)
  return idx


def top_k(fraction: float | None = None, *, k: int | None = None) -> Compressor:
  """Top-k sparsifier on the whole flattened pytree.

  .. math::
    C(x)_i = x_i \\, 1\\{i \\in \\mathrm{argtop}_k |x|\\}.

  Args:
    fraction: fraction of coordinates kept, in (0, 1]; ``k = ceil(fraction d)``
      (at least 1).
    k: alternatively, an explicit number of kept coordinates (clipped to ``d``).

  Returns:
    A stateless :class:`Compressor`; bits ``k (32 + ceil(log2 d))``.
  """
  validate_fraction_or_k(fraction, k, 'top_k')

  def compress(flat: jax.Array, key: PRNGKey) -> tuple[jax.Array, int]:
    del key
    kk = resolve_k(fraction, k, flat.size)
    idx = top_k_indices(flat, kk)
    return jnp.zeros_like(flat).at[idx].set(flat[idx]), top_k_bits(flat.size, kk)

  return stateless(compress, flat=True)
