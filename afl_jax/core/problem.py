"""A federated problem: a loss, each client's data, and how a client draws a batch.

The engine gathers ``client_views`` rows for the arriving clients and passes
``shared`` to every client unchanged, so data can be stored either per client
(a pytree with a leading client axis, as :func:`from_loss` does) or as one flat
array indexed by per-client ``(offset, size)`` views (the experiment pipeline,
where client sizes differ a lot and padding every client to the largest would
waste memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Problem:
  """Attributes:
  client_views: pytree with leading axis N: what client i sees (its data or an index).
  shared: pytree shared by all clients (may be None).
  loss_fn: ``loss_fn(params, batch) -> scalar`` (static).
  sample_fn: ``sample_fn(shared, view, key) -> batch`` for ONE client (static).
  num_clients: N (static).
  """

  client_views: Any
  shared: Any
  loss_fn: Callable[..., jax.Array] = struct.field(pytree_node=False)
  sample_fn: Callable[..., Any] = struct.field(pytree_node=False)
  num_clients: int = struct.field(pytree_node=False)


def _full_batch(shared, view, key):
  del shared, key
  return view


def from_loss(
  loss_fn: Callable[..., jax.Array],
  client_data: Any,
  *,
  full_batch: bool = True,
  batch_size: int | None = None,
) -> Problem:
  """A problem from a loss and per-client data stacked on a leading client axis.

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar``; ``batch`` has the structure of
      one client's slice of ``client_data``.
    client_data: pytree whose leaves have shape ``[N, n_i, ...]`` (equal n_i).
    full_batch: every local step uses the client's whole data (deterministic
      gradients, for verification against closed-form math).
    batch_size: with ``full_batch=False``, each step samples this many rows of the
      client's data uniformly with replacement.
  """
  leaves = jax.tree.leaves(client_data)
  if not leaves:
    raise ValueError('client_data must contain at least one array.')
  n = int(jnp.shape(leaves[0])[0])
  for leaf in leaves:
    if jnp.shape(leaf)[0] != n:
      raise ValueError(
        'every leaf of client_data needs the same leading client axis; got '
        f'{[jnp.shape(x) for x in leaves]}.'
      )
  if full_batch:
    sample_fn = _full_batch
  else:
    if batch_size is None or batch_size < 1:
      raise ValueError(f'batch_size must be >= 1 when full_batch=False; got {batch_size}.')
    rows = int(jnp.shape(leaves[0])[1])

    def sample_fn(shared, view, key):
      del shared
      idx = jax.random.randint(key, (batch_size,), 0, rows)
      return jax.tree.map(lambda x: x[idx], view)

  return Problem(
    client_views=client_data, shared=None, loss_fn=loss_fn, sample_fn=sample_fn, num_clients=n
  )
