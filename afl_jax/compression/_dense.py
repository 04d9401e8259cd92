"""Dense compressors: the identity and the deterministic sign quantizer.

Sign follows Sec. III-B, item (2) of Yang, Hou, Wu, "Convergence Analysis of
Asynchronous Federated Learning with Gradient Compression for Non-Convex
Optimization" (paper 004; docs/algorithms/asynfl.md):
``Sign(x)_i = 1{x_i >= 0} - 1{x_i < 0}`` (so ``0 -> +1``; also ``-0.0 -> +1`` since
``-0.0 >= 0``), applied to the paper's update
``Delta = x_K - x_start`` (eq. 3); the server adds ``C(Delta)`` (eq. 7).

The library's messages are pseudo-gradients ``m = x_start - x_K = -Delta``
(afl_jax.core.types), so the compressor applies the paper's operator to the
paper's quantity and returns the result in the library's sign:

.. math::  C_{lib}(m) = -\\mathrm{Sign}(-m), \\qquad
   C_{lib}(m)_i = +1 \\text{ if } m_i > 0, \\; -1 \\text{ otherwise}.

A coordinate whose update is exactly 0 (a weight no sample touches) is sent as
``Delta_i = +1`` (``m_i = -1``), as in the paper. Error feedback (eqs. 8-9) wraps
this compressor and so applies the same operator to ``Delta + e``. The optional
scaled variant multiplies by ``||x||_1 / d`` (the scale of signSGD with error
feedback, Karimireddy et al. 2019), computed over the whole flattened pytree
(symmetric, so the sign flip does not change it). :func:`paper_sign` is the
operator itself, for use on the paper's quantities.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.compression._base import (
  Compressor,
  PRNGKey,
  Updates,
  identity_bits,
  sign_bits,
  stateless,
  tree_size,
)


def identity() -> Compressor:
  """No compression: sends ``updates`` unchanged, ``32 d`` bits."""
  return stateless(lambda updates, key: (updates, identity_bits(tree_size(updates))))


def paper_sign(x: jax.Array) -> jax.Array:
  """The paper's ``Sign(x)_i = +1`` for ``x_i >= 0``, ``-1`` otherwise (Sec. III-B (2))."""
  return jnp.where(x >= 0, jnp.ones_like(x), -jnp.ones_like(x))


def sign(scaled: bool = False) -> Compressor:
  """Deterministic sign quantizer on library messages ``m = -Delta`` (see the module docstring).

  .. math::
    C(m) = -\\alpha \\, \\mathrm{Sign}(-m), \\qquad
    \\alpha = 1 \\text{ (unscaled) or } \\|m\\|_1 / d \\text{ (scaled)},

  i.e. the paper's ``Sign`` applied to ``Delta = -m`` (eqs. 3, 7), so ``m_i = 0``
  gives ``-alpha`` (the paper's ``Delta_i -> +alpha``).

  Args:
    scaled: if True multiply by ``||x||_1 / d`` (one extra 32-bit value).

  Returns:
    A stateless :class:`Compressor`; bits ``d`` (+32 if scaled).
  """
  scaled = bool(scaled)

  def compress(updates: Updates, key: PRNGKey) -> tuple[Updates, int]:
    del key
    d = tree_size(updates)
    signs = jax.tree.map(lambda m: -paper_sign(-m), updates)  # -Sign(Delta), Delta = -m
    if scaled:
      leaves = jax.tree_util.tree_leaves(updates)
      l1 = sum(jnp.sum(jnp.abs(x).astype(jnp.result_type(*leaves))) for x in leaves)
      alpha = l1 / d
      signs = jax.tree.map(lambda s: (alpha * s).astype(s.dtype), signs)
    return signs, sign_bits(d, scaled)

  return stateless(compress)
