"""Small pytree helpers shared by every rule (aggregation as a ``tensordot`` contraction: on
XLA:CPU an order of magnitude faster than ``mean(axis=0)``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

Tree = Any

# optax's tree arithmetic where it is the same operation (add and scale stay ours: optax's
# add starts from 0, which turns -0.0 into 0.0, and ours keep each leaf's dtype).
sub = optax.tree.sub
zeros_like = optax.tree.zeros_like
where = optax.tree.where  # select whole trees by a scalar condition


def add(a: Tree, b: Tree) -> Tree:
  return jax.tree.map(jnp.add, a, b)


def scale(s: jax.Array | float, a: Tree) -> Tree:
  return jax.tree.map(lambda x: (s * x).astype(x.dtype), a)


def axpy(alpha: jax.Array | float, x: Tree, y: Tree) -> Tree:
  """alpha * x + y, leafwise, keeping y's dtype."""
  return jax.tree.map(lambda xi, yi: (alpha * xi + yi).astype(yi.dtype), x, y)


def vdot(a: Tree, b: Tree) -> jax.Array:
  leaves = jax.tree.leaves(jax.tree.map(lambda x, y: jnp.vdot(x, y), a, b))
  return sum(leaves) if leaves else jnp.zeros(())


def global_norm(a: Tree) -> jax.Array:
  """Euclidean norm of all leaves taken together."""
  leaves = jax.tree.leaves(a)
  return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in leaves)) if leaves else jnp.zeros(())


def size(a: Tree) -> int:
  """Number of scalars in a pytree (static)."""
  return sum(int(x.size) for x in jax.tree.leaves(a))


VALUE_BITS = 32  # bits per transmitted real value, whatever the in-memory dtype


def dense_bits(a: Tree) -> int:
  """Bits of an uncompressed pytree message (e.g. a model broadcast): 32 per value."""
  return VALUE_BITS * size(a)


def weighted_sum(stacked: Tree, weights: jax.Array) -> Tree:
  """sum_m weights[m] * stacked[m] for every leaf of a tree stacked on axis 0."""
  return jax.tree.map(lambda x: jnp.tensordot(weights.astype(x.dtype), x, axes=1), stacked)


def gather(tree: Tree, index: jax.Array) -> Tree:
  """Rows ``index`` of every leaf (leading axis)."""
  return jax.tree.map(lambda x: x[index], tree)


def scatter(tree: Tree, index: jax.Array, rows: Tree, mask: jax.Array) -> Tree:
  """Write ``rows[m]`` into row ``index[m]`` where ``mask[m]`` (masked slots are routed out
  of bounds and dropped, never overwriting a real client)."""

  def one(x, r):
    return x.at[jnp.where(mask, index, x.shape[0])].set(r.astype(x.dtype), mode='drop')

  return jax.tree.map(one, tree, rows)


def stack_n(tree: Tree, n: int) -> Tree:
  """Broadcast a tree to a new leading axis of size n."""
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x)), tree)
