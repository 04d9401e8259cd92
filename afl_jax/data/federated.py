"""Federated view of a dataset: one flat, client-ordered array plus per-client ranges.

Client ``i`` owns rows ``offsets[i] : offsets[i] + sizes[i]`` of ``x``/``y``. Nothing is
padded per client, so memory is that of the dataset itself, and a vmapped client reads its
own rows with `sample_batch` given its (traced) offset and size. A held-out part of the
training split, ``unlabeled_x``, is owned by no client and has no labels (FedEcho's
server-side distillation set, Wang, Ma & Chen, "Stragglers Can Contribute More").
"""

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
  """Client-partitioned training data (host NumPy arrays).

  Attributes:
    x: float32[n, ...] normalized training inputs, grouped by client.
    y: int32[n] training labels, aligned with ``x``.
    offsets: int32[N] first row of each client.
    sizes: int32[N] number of rows of each client (all >= 1).
    test_x: float32[n_test, ...] normalized test inputs.
    test_y: int32[n_test] test labels.
    unlabeled_x: float32[n_u, ...] training inputs that no client owns; labels dropped.
    num_classes: number of classes.
  """

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
    """Returns ``(x, y)`` of client ``i`` (host-side helper for tests and inspection)."""
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
  """Splits off an unlabeled server set, then partitions the rest among clients.

  The rows are those of :func:`afl_jax.data.federate` (without a validation set),
  copied into client order.

  Args:
    dataset: centralized data (`load_fashion_mnist`, `load_digits`, ...).
    partition_name: one of ``'iid'``, ``'dirichlet'``, ``'shards'``.
    num_clients: number of clients N.
    unlabeled_fraction: fraction of the training split held out as ``unlabeled_x``.
    unlabeled_size: number of training samples held out (alternative to the fraction).
    **partition: ``alpha``, ``shards_per_client``, ``min_size`` and ``seed``, as in
      :func:`afl_jax.data.federate`.

  Returns:
    `FederatedData`. Same arguments -> identical arrays.
  """
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
  x: jax.Array,
  y: jax.Array,
  offset: jax.Array,
  size: jax.Array,
  key: jax.Array,
  batch_size: int,
) -> tuple[jax.Array, jax.Array]:
  """Samples one client's minibatch, uniformly **with replacement** from its rows.

  Jittable and vmappable over ``(offset, size, key)``: e.g.
  ``jax.vmap(sample_batch, in_axes=(None, None, 0, 0, 0, None))``.

  Args:
    x: ``[n, ...]`` flat client-ordered inputs (`FederatedData.x`).
    y: ``[n]`` labels.
    offset: scalar int, first row of the client (may be traced).
    size: scalar int >= 1, number of rows of the client (may be traced). With
      ``size == 0`` the result would be rows of another client; `make_federated`
      guarantees ``size >= 1``.
    key: PRNG key.
    batch_size: static batch size B.

  Returns:
    ``(x[idx], y[idx])`` with ``idx`` i.i.d. uniform on ``[offset, offset + size)``.
  """
  idx = offset + jax.random.randint(key, (batch_size,), 0, size, dtype=jnp.int32)
  return x[idx], y[idx]


def steps_per_epoch(sizes: np.ndarray, batch_size: int) -> np.ndarray:
  """Local steps for one pass over each client's data: int32 ``ceil(size / batch_size)``."""
  if batch_size < 1:
    raise ValueError(f'batch_size={batch_size!r} must be >= 1')
  sizes = np.asarray(sizes, dtype=np.int64)
  return (-(-sizes // batch_size)).astype(np.int32)
