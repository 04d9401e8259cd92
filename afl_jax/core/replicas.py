"""The replica axis of a sweep: which hyperparameters are traced (``[R]`` arrays the factory
builds the algorithm from inside the trace) and problems stacked for R runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afl_jax.core.problem import Problem

# Float hyperparameters that set a shape (Top-k's k = fraction * d): never traced.
STRUCTURAL = ('fraction',)


def is_traced(name: str, default: Any, value: Any) -> bool:
  """Is ``value`` one number per replica: a 1-D array, or numbers where the factory's default is
  a float (or None and the numbers floats), unless ``name`` sets a shape."""
  if name in STRUCTURAL:
    return False
  if hasattr(value, 'shape') and not isinstance(value, np.generic):
    return np.ndim(value) == 1
  if not isinstance(value, list | tuple):
    return False
  numbers = all(isinstance(v, int | float | np.number) and not isinstance(v, bool) for v in value)
  float_default = isinstance(default, float)
  optional_float = default is None and all(isinstance(v, float | np.floating) for v in value)
  return numbers and (float_default or optional_float)


def split_hparams(
  defaults: dict[str, Any], hparams: dict[str, Any], num_replicas: int
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
  """``(static, traced)``: the values given per replica as float64[R]; the rest static."""
  static, traced = {}, {}
  for k, v in hparams.items():
    if not is_traced(k, defaults.get(k), v):
      static[k] = v
      continue
    arr = np.asarray(v)
    if arr.shape != (num_replicas,) or arr.dtype == bool:
      raise ValueError(
        f'hyperparameter {k} must be a number or a sequence of {num_replicas} numbers '
        f'(one per replica); got {v!r}.'
      )
    traced[k] = arr.astype(np.float64)
  return static, traced


def _same(a: Any, b: Any) -> bool:
  if a is b:
    return True
  a, b = np.asarray(a), np.asarray(b)
  return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def stack_problems(problems: Sequence[Problem]) -> tuple[Problem, Problem]:
  """One problem for R replicas and its ``in_axes``: client views stacked, a ``shared`` leaf or
  the sizes stacked only where the replicas differ."""
  first = problems[0]
  static = lambda q: (q.loss_fn, q.sample_fn, q.num_clients, jax.tree.structure(q))
  if any(static(p) != static(first) for p in problems[1:]):
    raise ValueError('replicas must share loss_fn, sample_fn, num_clients and data structure.')
  stack = lambda *xs: np.stack([np.asarray(x) for x in xs])
  shared_leaves = list(zip(*[jax.tree.leaves(p.shared) for p in problems]))
  same = [all(_same(ls[0], x) for x in ls[1:]) for ls in shared_leaves]
  treedef = jax.tree.structure(first.shared)
  sizes = [p.client_sizes for p in problems]
  same_sizes = sizes[0] is None or all(_same(sizes[0], s) for s in sizes[1:])
  stacked = first.replace(
    client_views=jax.tree.map(stack, *[p.client_views for p in problems]),
    shared=jax.tree.unflatten(
      treedef, [ls[0] if s else stack(*ls) for ls, s in zip(shared_leaves, same)]
    ),
    client_sizes=sizes[0] if same_sizes else stack(*sizes),
  )
  axes = first.replace(
    client_views=jax.tree.map(lambda _: 0, first.client_views),
    shared=jax.tree.unflatten(treedef, [None if s else 0 for s in same]),
    client_sizes=None if same_sizes else 0,
  )
  return stacked, axes


def shared_problem_axes(problem: Problem) -> Problem:
  """``in_axes`` of a problem that every replica shares."""
  none = lambda t: jax.tree.map(lambda _: None, t)
  return problem.replace(
    client_views=none(problem.client_views), shared=none(problem.shared), client_sizes=None
  )


def stack_trees(trees: Sequence[Any]) -> Any:
  """R pytrees -> one pytree with a leading replica axis."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


__all__ = ['shared_problem_axes', 'split_hparams', 'stack_problems', 'stack_trees']
