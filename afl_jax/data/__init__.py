"""Datasets by name (``DATASETS``: a loader returning an ArrayDataset, or with ``federated=True`` a
ClientLayout) and partitions (docs/extending.md)."""

from afl_jax import checks
from afl_jax.data.base import ArrayDataset, DataError
from afl_jax.data.cifar10 import load_cifar10
from afl_jax.data.digits import DIGITS_COUNT, UNLABELED_SOURCES, external_unlabeled, load_digits
from afl_jax.data.federated import (
  PARTITIONS,
  ClientLayout,
  federate,
  grouped,
  make_federated,
  steps_per_epoch,
)
from afl_jax.data.fmnist import load_fashion_mnist
from afl_jax.data.partition import PartitionError, dirichlet, iid, shards
from afl_jax.data.synthetic import make_synthetic
from afl_jax.registry import Registry

# A loader's arguments are filled by the pipeline (not settings of the dataset).
DATASETS = Registry(
  'dataset', section='dataset_args', supplied=('data_dir', 'download', 'seed', 'num_clients')
)
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
  make_synthetic,
  fixed={'samples_per_client': None},  # FedProx's power law
  federated=True,
  alpha=checks.NON_NEGATIVE,
  beta=checks.NON_NEGATIVE,
  dim=checks.integer(1),
  num_classes=checks.integer(2),
  test_fraction=checks.real(0.0, 1.0, low_open=True, high_open=True),
)

make, names, settings, register = DATASETS.verbs()

__all__ = [
  'DATASETS',
  'DIGITS_COUNT',
  'PARTITIONS',
  'UNLABELED_SOURCES',
  'ArrayDataset',
  'ClientLayout',
  'DataError',
  'PartitionError',
  'dirichlet',
  'external_unlabeled',
  'federate',
  'grouped',
  'iid',
  'load_cifar10',
  'load_digits',
  'load_fashion_mnist',
  'make_federated',
  'make',
  'make_synthetic',
  'names',
  'register',
  'settings',
  'shards',
  'steps_per_epoch',
]
