"""Dense compressors: the identity and the deterministic sign quantizer.

Sign follows Sec. III-B, item (2) of Yang, Hou, Wu, "Convergence Analysis of
Asynchronous Federated Learning with Gradient Compression for Non-Convex
Optimization": ``Sign(x)_i = 1{x_i >= 0} - 1{x_i < 0}`` (so ``0 -> +1``; also
``-0.0 -> +1`` since ``-0.0 >= 0``).  The optional scaled variant multiplies by
``||x||_1 / d`` (the scale of signSGD with error feedback, Karimireddy et al.
2019), computed over the whole flattened pytree.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.compression._base import (
  Compressor,
  EmptyState,
  PRNGKey,
  Updates,
  bits_scalar,
  identity_bits,
  sign_bits,
  tree_size,
)


def _init_empty(updates: Updates) -> EmptyState:
  del updates
  return EmptyState()


def identity() -> Compressor:
  """No compression: sends ``updates`` unchanged, ``32 d`` bits."""

  def compress(
    updates: Updates, state: EmptyState, key: PRNGKey
  ) -> tuple[Updates, EmptyState, jax.Array]:
    del key
    return updates, state, bits_scalar(identity_bits(tree_size(updates)))

  return Compressor(init=_init_empty, compress=compress)


def sign(scaled: bool = False) -> Compressor:
  """Deterministic sign quantizer.

  .. math::
    C(x)_i = \\alpha \\, (1\\{x_i \\ge 0\\} - 1\\{x_i < 0\\}), \\qquad
    \\alpha = 1 \\text{ (unscaled) or } \\|x\\|_1 / d \\text{ (scaled)}.

  Args:
    scaled: if True multiply by ``||x||_1 / d`` (one extra 32-bit value).

  Returns:
    A stateless :class:`Compressor`; bits ``d`` (+32 if scaled).
  """
  scaled = bool(scaled)

  def compress(
    updates: Updates, state: EmptyState, key: PRNGKey
  ) -> tuple[Updates, EmptyState, jax.Array]:
    del key
    d = tree_size(updates)
    signs = jax.tree.map(lambda x: jnp.where(x >= 0, jnp.ones_like(x), -jnp.ones_like(x)), updates)
    if scaled:
      leaves = jax.tree_util.tree_leaves(updates)
      l1 = sum(jnp.sum(jnp.abs(x).astype(jnp.result_type(*leaves))) for x in leaves)
      alpha = l1 / d
      signs = jax.tree.map(lambda s: (alpha * s).astype(s.dtype), signs)
    return signs, state, bits_scalar(sign_bits(d, scaled))

  return Compressor(init=_init_empty, compress=compress)
