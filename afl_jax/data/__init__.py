"""Datasets (Fashion-MNIST, digits, Synthetic(alpha, beta)), partitions and batching."""

from afl_jax.data.base import ArrayDataset, DataError
from afl_jax.data.digits import load_digits
from afl_jax.data.federated import (
  PARTITIONS,
  FederatedData,
  make_federated,
  sample_batch,
  steps_per_epoch,
)
from afl_jax.data.fmnist import load_fashion_mnist
from afl_jax.data.idx import parse_idx, read_idx
from afl_jax.data.partition import Partition, dirichlet, iid, shards
from afl_jax.data.synthetic import make_synthetic

__all__ = [
  'PARTITIONS',
  'ArrayDataset',
  'DataError',
  'FederatedData',
  'Partition',
  'dirichlet',
  'iid',
  'load_digits',
  'load_fashion_mnist',
  'make_federated',
  'make_synthetic',
  'parse_idx',
  'read_idx',
  'sample_batch',
  'shards',
  'steps_per_epoch',
]
