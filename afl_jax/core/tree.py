"""Pytree helpers shared by the rules (aggregation as a ``tensordot``: on XLA:CPU an order of
magnitude faster than ``mean(axis=0)``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

Tree = Any

# optax's where it is the same operation (optax's add turns -0.0 into 0.0; ours keep dtypes)
sub = optax.tree.sub
zeros_like = optax.tree.zeros_like
where = optax.tree.where


def add(a: Tree, b: Tree) -> Tree:
  return jax.tree.map(jnp.add, a, b)


def scale(s: jax.Array | float, a: Tree) -> Tree:
  return jax.tree.map(lambda x: (s * x).astype(x.dtype), a)


def axpy(alpha: jax.Array | float, x: Tree, y: Tree) -> Tree:
  return jax.tree.map(lambda xi, yi: (alpha * xi + yi).astype(yi.dtype), x, y)


def vdot(a: Tree, b: Tree) -> jax.Array:
  leaves = jax.tree.leaves(jax.tree.map(lambda x, y: jnp.vdot(x, y), a, b))
  return sum(leaves) if leaves else jnp.zeros(())


def global_norm(a: Tree) -> jax.Array:
  leaves = jax.tree.leaves(a)
  return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in leaves)) if leaves else jnp.zeros(())


def size(a: Tree) -> int:
  return sum(int(x.size) for x in jax.tree.leaves(a))


VALUE_BITS = 32  # bits per transmitted real value, whatever the in-memory dtype


def dense_bits(a: Tree) -> int:
  """Bits of an uncompressed message: 32 per value."""
  return VALUE_BITS * size(a)


def weighted_sum(stacked: Tree, weights: jax.Array) -> Tree:
  return jax.tree.map(lambda x: jnp.tensordot(weights.astype(x.dtype), x, axes=1), stacked)


def gather(tree: Tree, index: jax.Array) -> Tree:
  return jax.tree.map(lambda x: x[index], tree)


def scatter(tree: Tree, index: jax.Array, rows: Tree, mask: jax.Array) -> Tree:
  """``rows[m]`` into row ``index[m]`` where ``mask[m]`` (others routed out of bounds, dropped)."""
  one = lambda x, r: x.at[jnp.where(mask, index, x.shape[0])].set(r.astype(x.dtype), mode='drop')
  return jax.tree.map(one, tree, rows)


def stack_n(tree: Tree, n: int) -> Tree:
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x)), tree)
