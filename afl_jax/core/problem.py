"""A federated problem: a loss, each client's data (a leading client axis, unequal clients padded,
or views into ``shared``) and how a client draws a batch; docs/architecture.md, "Seams"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from afl_jax.errors import ArgumentError

REDUCTIONS = ('mean', 'sum')


def _full_batch(shared, view, key):
  return view


@struct.dataclass
class Problem:
  """``loss_fn(params, batch) -> scalar`` and ``sample_fn(shared, view, key) -> batch`` (ONE
  client's) are static."""

  client_views: Any  # leading axis N: what client i sees (its data or an index)
  shared: Any  # shared by all clients (may be None)
  loss_fn: Callable[..., jax.Array] = struct.field(pytree_node=False)
  sample_fn: Callable[..., Any] = struct.field(pytree_node=False)
  num_clients: int = struct.field(pytree_node=False)
  client_sizes: Any = None  # int32[N] examples per client (None: the engine counts 1 each)


def from_loss(loss_fn: Callable[..., jax.Array], client_data: Any, *, full_batch: bool = True,
              batch_size: int | None = None, reduction: str = 'mean') -> Problem:  # fmt: skip
  """A problem from ``loss_fn(params, batch) -> scalar`` and ``client_data``: a pytree of leaves
  ``[N, n, ...]``, or a list of N per-client pytrees (unequal sizes: with full batches the loss
  is reduced by ``reduction`` over the valid rows). ``full_batch``: each step uses the client's
  whole data; else ``batch_size`` rows drawn uniformly with replacement."""
  if reduction not in REDUCTIONS:
    raise ValueError(f'reduction must be one of {REDUCTIONS}; got {reduction!r}.')
  if not full_batch and (batch_size is None or batch_size < 1):
    raise ValueError(f'batch_size must be >= 1 when full_batch=False; got {batch_size}.')
  if isinstance(client_data, list):
    return _ragged(loss_fn, client_data, full_batch, batch_size, reduction)
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
  rows = int(jnp.shape(leaves[0])[1]) if jnp.ndim(leaves[0]) > 1 else 1

  def sample_fn(shared, view, key):
    idx = jax.random.randint(key, (batch_size,), 0, rows)
    return jax.tree.map(lambda x: x[idx], view)

  sample = _full_batch if full_batch else sample_fn  # one full-batch sampler: problems stack
  return Problem(client_data, None, loss_fn, sample, n, np.full(n, rows, np.int32))


def _ragged(loss_fn, clients, full_batch, batch_size, reduction) -> Problem:
  if not clients:
    raise ValueError('client_data must name at least one client; got an empty list.')
  structure, sizes = jax.tree.structure(clients[0]), []
  for i, c in enumerate(clients):
    rows = {int(np.shape(x)[0]) for x in jax.tree.leaves(c)}
    if jax.tree.structure(c) != structure or len(rows) != 1 or 0 in rows:
      raise ValueError(
        f"client {i} needs client 0's data structure, >= 1 rows, equal in every leaf."
      )
    sizes.append(rows.pop())
  width = max(sizes)

  def pad(*leaves):
    pad_rows = lambda x: np.pad(x, [(0, width - len(x))] + [(0, 0)] * (x.ndim - 1))
    return np.stack([pad_rows(np.asarray(x)) for x in leaves])

  data, sizes = jax.tree.map(pad, *clients), np.asarray(sizes, np.int32)

  def sample_fn(shared, view, key):
    if full_batch:
      width = jax.tree.leaves(view['rows'])[0].shape[0]
      return {'rows': view['rows'], 'valid': jnp.arange(width) < view['size']}
    idx = jax.random.randint(key, (batch_size,), 0, view['size'])  # valid rows only
    return jax.tree.map(lambda x: x[idx], view['rows'])

  def masked_loss(params, batch):
    one = lambda row: loss_fn(params, jax.tree.map(lambda x: x[None], row))
    per_row = jax.vmap(one)(batch['rows'])
    valid = batch['valid'].astype(per_row.dtype)
    total = jnp.sum(jnp.where(batch['valid'], per_row, 0.0))
    return total / jnp.sum(valid) if reduction == 'mean' else total

  loss = masked_loss if full_batch else loss_fn
  return Problem({'rows': data, 'size': sizes}, None, loss, sample_fn, len(clients), sizes)


def _leaf_text(x: Any) -> str:
  if hasattr(x, 'shape') and hasattr(x, 'dtype'):
    return f'{np.dtype(x.dtype).name}{list(x.shape)}'
  return type(x).__name__


def describe_tree(tree: Any, name: str = '') -> str:
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  if not leaves:
    return f'{name} (no arrays)'
  return ', '.join(f'{name}{jax.tree_util.keystr(path)} {_leaf_text(x)}' for path, x in leaves)


def check_params(problem: Problem, params: Any) -> None:
  """ArgumentError naming the leaf or both trees' shapes unless ``params`` (the API's ``params0``)
  has floating leaves and ``loss_fn`` on client 0's batch is a scalar (abstract)."""
  name = 'params0'
  leaves = jax.tree_util.tree_flatten_with_path(params)[0]
  if not leaves:
    raise ArgumentError(f'{name}={params!r} holds no arrays; pass a pytree of float arrays.')
  for path, x in leaves:
    where = f'{name}{jax.tree_util.keystr(path)}'
    if isinstance(x, float):
      continue
    dtype = getattr(x, 'dtype', None)
    if dtype is None:
      raise ArgumentError(f'{where}={x!r} is not an array; every leaf of {name} must be one.')
    if not jnp.issubdtype(dtype, jnp.inexact):
      raise ArgumentError(
        f'{where} has dtype {np.dtype(dtype).name}; pass it as jnp.asarray(..., jnp.float32).'
      )

  def batch0(shared, views):  # the data as arguments: abstract, as in the engine
    return problem.sample_fn(shared, jax.tree.map(lambda v: v[0], views), jax.random.key(0))

  def first_line(e: BaseException) -> str:
    return (str(e).strip() or repr(e)).splitlines()[0].rstrip('.')

  data = (problem.shared, problem.client_views)
  try:
    out = jax.eval_shape(lambda p, s, v: problem.loss_fn(p, batch0(s, v)), params, *data)
  except Exception as e:  # the user's loss on the user's params: any error is the mismatch
    try:
      batch = f"client 0's batch has {describe_tree(jax.eval_shape(batch0, *data), 'batch')}"
    except Exception as e2:  # the sampler itself fails: say so
      batch = f'drawing a batch of client 0 raised {type(e2).__name__}: {first_line(e2)}'
    raise ArgumentError(
      f'{name} does not fit the problem: loss_fn({name}, a batch of client 0) raised '
      f'{type(e).__name__}: {first_line(e)}. {name} has {describe_tree(params, name)}; '
      f'{batch}. Pass {name} with the structure and leaf shapes that loss_fn reads.'
    ) from e
  if getattr(out, 'shape', None) != ():
    shapes = jax.tree.map(_leaf_text, out)
    raise ArgumentError(f'loss_fn({name}, batch) must return a scalar; it returns {shapes}.')
