"""Client data: :class:`ClientLayout` views ``x[index[offset_i : offset_i + size_i]]``."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from afl_jax.data import partition as partition_lib
from afl_jax.data.base import ArrayDataset
from afl_jax.data.base import normalizer as normalizer
from afl_jax.data.partition import PARTITIONS as PARTITIONS

_VALIDATION_STREAM = 0x7A11D  # folded into the seed of the validation split


class ClientLayout(NamedTuple):
  """Training data grouped by client (``sizes`` >= 1), the test split, ``unlabeled_x`` (FedEcho's
  server set), the validation set."""

  x: np.ndarray
  y: np.ndarray
  index: np.ndarray
  offsets: np.ndarray
  sizes: np.ndarray
  test_x: np.ndarray
  test_y: np.ndarray
  unlabeled_x: np.ndarray
  val_x: np.ndarray
  val_y: np.ndarray
  num_classes: int

  @property
  def num_clients(self) -> int:
    return len(self.sizes)

  def client_rows(self, i: int) -> np.ndarray:
    return self.index[int(self.offsets[i]) : int(self.offsets[i] + self.sizes[i])]


def federate(
  dataset: ArrayDataset,
  partition_name: str,
  num_clients: int,
  *,
  alpha: float = 0.5,
  shards_per_client: int = 2,
  min_size: int = 10,
  seed: int = 0,
  unlabeled_size: int = 0,
  validation_size: int = 0,
) -> ClientLayout:
  """Hold out ``validation_size`` labeled, then ``unlabeled_size`` unlabeled samples, and partition
  the rest among ``num_clients`` by ``partition_name``, all drawn from ``seed``."""
  if partition_name not in PARTITIONS:
    raise ValueError(f'partition_name={partition_name!r} must be one of {PARTITIONS}')
  n = len(dataset.train_y)
  if not 0 <= validation_size < n:
    raise ValueError(f'validation_size={validation_size!r} must be in [0, {n - 1}]')
  pool = np.arange(n)
  val_idx = pool[:0]
  if validation_size:
    vrng = np.random.default_rng([seed, _VALIDATION_STREAM])
    val_idx = np.sort(vrng.choice(n, size=validation_size, replace=False))
    pool = np.setdiff1d(pool, val_idx)
  m = len(pool)
  if not 0 <= unlabeled_size < m:
    raise ValueError(f'unlabeled_size={unlabeled_size!r} must be in [0, {m - 1}]')
  rng = np.random.default_rng(seed)
  perm = rng.permutation(m)
  unlabeled_idx = pool[np.sort(perm[:unlabeled_size])]
  labeled_idx = pool[np.sort(perm[unlabeled_size:])]
  labels = dataset.train_y[labeled_idx]
  if partition_name == 'dirichlet':
    part = partition_lib.dirichlet(labels, num_clients, alpha, rng, min_size=min_size)
  elif partition_name == 'shards':
    part = partition_lib.shards(labels, num_clients, shards_per_client, rng)
  else:
    part = partition_lib.iid(labels, num_clients, rng)
  if part.sizes.min() < 1:
    why = f'partition {partition_name!r} left a client without samples; use fewer clients'
    raise partition_lib.PartitionError(why, 'num_clients')
  norm = normalizer(dataset.train_x)
  return ClientLayout(
    x=norm(dataset.train_x),
    y=np.asarray(dataset.train_y, np.int32),
    index=labeled_idx[part.order].astype(np.int32),
    offsets=part.offsets,
    sizes=part.sizes,
    test_x=norm(dataset.test_x),
    test_y=np.asarray(dataset.test_y, np.int32),
    unlabeled_x=norm(dataset.train_x[unlabeled_idx]),
    val_x=norm(dataset.train_x[val_idx]),
    val_y=np.asarray(dataset.train_y[val_idx], np.int32),
    num_classes=int(dataset.num_classes),
  )


def grouped(x, y, offsets, sizes, test_x, test_y, unlabeled_x, num_classes) -> ClientLayout:
  """The layout of data already grouped by client (client i owns rows ``offsets[i] :
  offsets[i] + sizes[i]`` of ``x``, each >= 1), without a validation set."""
  index = np.arange(len(y), dtype=np.int32)
  return ClientLayout(
    x, y, index, offsets, sizes, test_x, test_y, unlabeled_x, x[:0], y[:0], num_classes
  )


def make_federated(dataset: ArrayDataset, partition_name: str, num_clients: int, **partition):
  """The rows :func:`federate` gives each client, copied into client order (``index = arange``)."""
  lay = federate(dataset, partition_name, num_clients, **partition)
  rows = lay.index
  return lay._replace(x=lay.x[rows], y=lay.y[rows], index=np.arange(len(rows), dtype=np.int32))


def steps_per_epoch(sizes: np.ndarray, batch_size: int) -> np.ndarray:
  if batch_size < 1:
    raise ValueError(f'batch_size={batch_size!r} must be >= 1')
  return (-(-np.asarray(sizes, dtype=np.int64) // batch_size)).astype(np.int32)
