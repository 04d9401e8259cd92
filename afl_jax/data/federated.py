"""Client-ordered data: client i owns rows ``offsets[i] : offsets[i] + sizes[i]`` of one array;
``unlabeled_x`` are training inputs no client owns (FedEcho's server set)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from afl_jax.data.base import ArrayDataset
from afl_jax.data.base import normalizer as normalizer
from afl_jax.data.layout import federate  # the split and partition live there, once
from afl_jax.data.partition import PARTITIONS as PARTITIONS


class FederatedData(NamedTuple):
  """Client-partitioned normalized training data (host NumPy) with the test split, ``unlabeled_x``
  and ``num_classes``; every client has >= 1 row."""

  x: np.ndarray
  y: np.ndarray
  offsets: np.ndarray
  sizes: np.ndarray
  test_x: np.ndarray
  test_y: np.ndarray
  unlabeled_x: np.ndarray
  num_classes: int

  @property
  def num_clients(self) -> int:
    return len(self.sizes)

  def client(self, i: int) -> tuple[np.ndarray, np.ndarray]:
    sl = slice(int(self.offsets[i]), int(self.offsets[i] + self.sizes[i]))
    return self.x[sl], self.y[sl]


def make_federated(
  dataset: ArrayDataset,
  partition_name: str,
  num_clients: int,
  *,
  unlabeled_fraction: float = 0.0,
  unlabeled_size: int = 0,
  **partition,
) -> FederatedData:
  """The rows :func:`afl_jax.data.federate` gives each client, copied into client order."""
  n = len(dataset.train_y)
  if not 0.0 <= unlabeled_fraction < 1.0:
    raise ValueError(f'unlabeled_fraction={unlabeled_fraction!r} must be in [0, 1)')
  if unlabeled_fraction and unlabeled_size:
    raise ValueError(
      f'give unlabeled_fraction={unlabeled_fraction} or unlabeled_size={unlabeled_size}, not both'
    )
  unlabeled_size = unlabeled_size or int(round(unlabeled_fraction * n))
  layout = federate(
    dataset, partition_name, num_clients, unlabeled_size=unlabeled_size, **partition
  )
  grouped = {f: getattr(layout, f) for f in FederatedData._fields}
  return FederatedData(**{**grouped, 'x': layout.x[layout.index], 'y': layout.y[layout.index]})


def sample_batch(
  x: jax.Array, y: jax.Array, offset: jax.Array, size: jax.Array, key: jax.Array, batch_size: int
) -> tuple[jax.Array, jax.Array]:
  """``batch_size`` rows drawn uniformly with replacement from the client's rows (vmappable)."""
  idx = offset + jax.random.randint(key, (batch_size,), 0, size, dtype=jnp.int32)
  return x[idx], y[idx]


def steps_per_epoch(sizes: np.ndarray, batch_size: int) -> np.ndarray:
  """int32 ``ceil(size / batch_size)``."""
  if batch_size < 1:
    raise ValueError(f'batch_size={batch_size!r} must be >= 1')
  sizes = np.asarray(sizes, dtype=np.int64)
  return (-(-sizes // batch_size)).astype(np.int32)
