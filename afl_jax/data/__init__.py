"""Datasets by name (Fashion-MNIST, digits, Synthetic(alpha, beta)), partitions and batching.

``DATASETS`` (a :class:`~afl_jax.registry.Registry`, like every component a config
names) maps a config's ``dataset`` name to a loader called as
``loader(data_dir=..., download=..., seed=...) -> ArrayDataset``; an entry
registered with ``federated=True`` is instead called as
``loader(num_clients=..., seed=...) -> FederatedData`` (data generated per client).
"""

from afl_jax.data.base import ArrayDataset, DataError
from afl_jax.data.cifar10 import load_cifar10
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
from afl_jax.data.layout import ClientLayout, federate, from_federated
from afl_jax.data.partition import Partition, PartitionError, dirichlet, iid, shards
from afl_jax.data.synthetic import make_synthetic
from afl_jax.data.unlabeled import DIGITS_COUNT, UNLABELED_SOURCES, external_unlabeled
from afl_jax.registry import Registry

# A loader's arguments are filled by the pipeline (not settings of the dataset).
DATASETS = Registry('dataset', supplied=('data_dir', 'download', 'seed', 'num_clients'))
DATASETS.register(
  'fmnist',
  lambda *, data_dir=None, download=False, seed=0: load_fashion_mnist(data_dir, download=download),
)
DATASETS.register(
  'cifar10',
  lambda *, data_dir=None, download=False, seed=0: load_cifar10(data_dir, download=download),
)
DATASETS.register('digits', lambda *, data_dir=None, download=False, seed=0: load_digits(seed=seed))
DATASETS.register(
  'synthetic',
  lambda *, num_clients, seed=0: make_synthetic(num_clients=num_clients, seed=seed),
  federated=True,
)

__all__ = [
  'DATASETS',
  'DIGITS_COUNT',
  'PARTITIONS',
  'UNLABELED_SOURCES',
  'ArrayDataset',
  'ClientLayout',
  'DataError',
  'FederatedData',
  'Partition',
  'PartitionError',
  'dirichlet',
  'external_unlabeled',
  'federate',
  'from_federated',
  'iid',
  'load_cifar10',
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
