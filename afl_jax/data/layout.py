"""Client data as views into one sample array: ``x[index[offset_i : offset_i + size_i]]``.

The training samples stay in ONE fixed order (the dataset's, after the optional
training subset); a partition is an int32 permutation ``index`` grouped by client
plus per-client ``(offset, size)``. Runs that differ only in their partition (a
sweep over seeds) can therefore share ``x`` and ``y`` and stack their own
``index`` and views. The split is the one of :func:`afl_jax.data.make_federated`
(same seed -> the same rows for every client), with an optional validation set
held out first (its labels are used only for evaluation).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from afl_jax.data import partition as partition_lib
from afl_jax.data.base import ArrayDataset, normalizer
from afl_jax.data.partition import PARTITIONS

# Folded into the seed of the validation split, so that it draws from its own stream.
_VALIDATION_STREAM = 0x7A11D


class ClientLayout(NamedTuple):
  """Partitioned training data as views into one sample array (host NumPy).

  Attributes:
    x: float32[n, ...] normalized training samples, in the dataset's order.
    y: int32[n] their labels.
    index: int32[m] rows of ``x`` owned by clients, grouped by client.
    offsets: int32[N] first position of each client in ``index``.
    sizes: int32[N] number of rows of each client (all >= 1).
    test_x, test_y: the normalized test split.
    unlabeled_x: float32[n_u, ...] training inputs no client owns; labels dropped.
    val_x, val_y: the validation set held out before partitioning (may be empty).
    num_classes: number of classes.
  """

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
    """Rows of ``x`` owned by client ``i``."""
    return self.index[int(self.offsets[i]) : int(self.offsets[i] + self.sizes[i])]

  def client(self, i: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of client ``i`` (host-side helper for tests and inspection)."""
    rows = self.client_rows(i)
    return self.x[rows], self.y[rows]


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
  """Holds out a validation set, splits off an unlabeled set, partitions the rest.

  With ``validation_size=0`` the clients own exactly the rows
  :func:`afl_jax.data.make_federated` gives them for the same arguments.

  Args:
    dataset: centralized data (``afl_jax.data.load_fashion_mnist``, ...).
    partition_name: one of ``'iid'``, ``'dirichlet'``, ``'shards'``.
    num_clients: number of clients N.
    alpha: Dirichlet concentration (``'dirichlet'`` only).
    shards_per_client: shards per client (``'shards'`` only).
    min_size: minimum samples per client (``'dirichlet'`` only).
    seed: seed of the splits and the partition.
    unlabeled_size: training samples held out, unlabeled, for the server.
    validation_size: training samples held out, labeled, for evaluation only.

  Raises:
    ValueError: sizes out of range, or a partition that leaves a client without data.
  """
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
  if partition_name == 'iid':
    part = partition_lib.iid(labels, num_clients, rng)
  elif partition_name == 'dirichlet':
    part = partition_lib.dirichlet(labels, num_clients, alpha, rng, min_size=min_size)
  else:
    part = partition_lib.shards(labels, num_clients, shards_per_client, rng)
  if part.sizes.min() < 1:
    raise partition_lib.PartitionError(
      f'partition {partition_name!r} left a client without samples (sizes min '
      f'{part.sizes.min()}); use fewer clients',
      'num_clients',
    )
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


def from_federated(fed) -> ClientLayout:
  """The layout of data already grouped by client (``afl_jax.data.FederatedData``)."""
  index = np.arange(len(fed.y), dtype=np.int32)
  return ClientLayout(**fed._asdict(), index=index, val_x=fed.x[:0], val_y=fed.y[:0])
