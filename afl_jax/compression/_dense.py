"""The identity and the Sign quantizer (Yang, Hou, Wu, Sec. III-B item (2);
docs/algorithms/asynfl.md, "Compressors")."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.compression._base import (
  COMPRESSORS,
  Compressor,
  PRNGKey,
  Updates,
  identity_bits,
  sign_bits,
  stateless,
  tree_size,
)


@COMPRESSORS.register('identity')
def identity() -> Compressor:
  return stateless(lambda updates, key: (updates, identity_bits(tree_size(updates))))


def paper_sign(x: jax.Array) -> jax.Array:
  """The paper's ``Sign(x)_i = +1`` for ``x_i >= 0``, ``-1`` otherwise."""
  return jnp.where(x >= 0, jnp.ones_like(x), -jnp.ones_like(x))


@COMPRESSORS.register('sign')
def sign(scaled: bool = False) -> Compressor:
  """Sign on library messages ``m = -Delta``: ``-alpha Sign(-m)``, ``d`` bits (+32 if
  ``scaled``)."""

  def compress(updates: Updates, key: PRNGKey) -> tuple[Updates, int]:
    del key
    d = tree_size(updates)
    signs = jax.tree.map(lambda m: -paper_sign(-m), updates)  # -Sign(Delta), Delta = -m
    if scaled:
      leaves = jax.tree_util.tree_leaves(updates)
      l1 = sum(jnp.sum(jnp.abs(x).astype(jnp.result_type(*leaves))) for x in leaves)
      signs = jax.tree.map(lambda s: (l1 / d * s).astype(s.dtype), signs)
    return signs, sign_bits(d, scaled)

  return stateless(compress)
