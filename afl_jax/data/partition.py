"""Partitions of labels, client i owning ``order[offsets[i] : offsets[i] + sizes[i]]``: ``iid``;
``dirichlet`` (Yurochkin et al. 2019, MasFL App. E.1: per class, ``Dir(alpha 1_N)`` shares);
``shards`` (McMahan et al. 2017: label-sorted shards, ``shards_per_client`` each)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from afl_jax import checks

PARTITIONS = ('iid', 'dirichlet', 'shards')
SPECS = {
  'num_clients': checks.integer(1),
  'min_size': checks.integer(0),
  'alpha': checks.POSITIVE,  # Dirichlet's concentration
  'shards_per_client': checks.integer(1),
}


class PartitionError(ValueError):
  """A partition that cannot give every client data; ``argument`` names the argument to change."""

  def __init__(self, message: str, argument: str):
    super().__init__(message)
    self.argument = argument


class Partition(NamedTuple):
  """Sample indices ``order`` grouped by client; ``offsets`` and ``sizes`` int32[N]."""

  order: np.ndarray
  offsets: np.ndarray
  sizes: np.ndarray


def _partition(assignment: np.ndarray, num_clients: int) -> Partition:
  """The Partition of ``assignment[j]``, the client owning sample ``j``."""
  order = np.argsort(assignment, kind='stable').astype(np.int64)
  sizes = np.bincount(assignment, minlength=num_clients).astype(np.int32)
  return Partition(order, (np.cumsum(sizes) - sizes).astype(np.int32), sizes)


def _check(name: str, value) -> None:
  if SPECS[name].violation(value) is not None:
    raise ValueError(f'{name}={value!r} must be {SPECS[name].describe()}')


def _checked(labels, num_clients: int, **args) -> np.ndarray:
  """``labels`` as a 1-D integer array >= 0, after checking ``args`` (``min_size`` or
  ``shards_per_client``: the samples each client needs) and ``num_clients``."""
  labels = np.asarray(labels)
  if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(
      f'labels must be a 1-D integer array, got shape {labels.shape} dtype {labels.dtype}'
    )
  if labels.size and labels.min() < 0:
    raise ValueError(f'labels must be >= 0, got min {labels.min()}')
  for name, value in args.items():
    _check(name, value)
  per_client = max([1, *args.values()])
  try:
    _check('num_clients', num_clients)
    if num_clients * per_client > len(labels):
      need = f' and each client needs {per_client}' if per_client > 1 else ''
      raise PartitionError(
        f'num_clients={num_clients} must be in [1, {len(labels) // per_client}]: there are '
        f'{len(labels)} samples{need}',
        'num_clients',
      )
  except ValueError as e:
    if 'shards_per_client' not in args:
      raise
    raise PartitionError(f'{e} (shards_per_client={per_client})', 'shards_per_client') from None
  return labels


def iid(labels: np.ndarray, num_clients: int, rng: np.random.Generator | int) -> Partition:
  n = len(_checked(labels, num_clients))
  assignment = np.empty(n, dtype=np.int64)
  assignment[np.random.default_rng(rng).permutation(n)] = np.arange(n) * num_clients // n
  return _partition(assignment, num_clients)


def dirichlet(
  labels: np.ndarray,
  num_clients: int,
  alpha: float,
  rng: np.random.Generator | int,
  *,
  min_size: int = 10,
  max_tries: int = 1000,
) -> Partition:
  """Per-class Dirichlet label skew, redrawn up to ``max_tries`` times until every client has
  ``min_size``."""
  labels = _checked(labels, num_clients, min_size=min_size)
  _check('alpha', alpha)
  rng, n = np.random.default_rng(rng), len(labels)
  classes = [np.flatnonzero(labels == k) for k in np.unique(labels)]
  for _ in range(max_tries):
    assignment = np.empty(n, dtype=np.int64)
    for idx in classes:
      p = rng.dirichlet(np.full(num_clients, float(alpha)))
      if not np.all(np.isfinite(p)):  # a degenerate draw: draw again
        break
      cuts = np.round(np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
      counts = np.diff(np.concatenate([[0], cuts, [len(idx)]]))
      assignment[rng.permutation(idx)] = np.repeat(np.arange(num_clients), counts)
    else:
      if np.bincount(assignment, minlength=num_clients).min() >= min_size:
        return _partition(assignment, num_clients)
  raise PartitionError(
    f'dirichlet: no draw in max_tries={max_tries} gave every one of num_clients='
    f'{num_clients} clients min_size={min_size} samples at alpha={alpha}; use a larger '
    'alpha, fewer clients or a smaller min_size',
    'alpha',
  )


def shards(
  labels: np.ndarray, num_clients: int, shards_per_client: int, rng: np.random.Generator | int
) -> Partition:
  labels = _checked(labels, num_clients, shards_per_client=shards_per_client)
  rng, n, num_shards = np.random.default_rng(rng), len(labels), num_clients * shards_per_client
  shuffled = rng.permutation(n)
  by_label = shuffled[np.argsort(labels[shuffled], kind='stable')]
  client_of_shard = np.empty(num_shards, dtype=np.int64)
  client_of_shard[rng.permutation(num_shards)] = np.arange(num_shards) // shards_per_client
  assignment = np.empty(n, dtype=np.int64)
  assignment[by_label] = client_of_shard[np.arange(n) * num_shards // n]
  return _partition(assignment, num_clients)
