"""Algorithms by name. Importing a family module registers its algorithms."""

from afl_jax.algorithms import baselines  # noqa: F401  (registers fedavg, fedbuff, fedasync)
from afl_jax.algorithms.registry import get, hyperparameters, names, register

__all__ = ['get', 'hyperparameters', 'names', 'register']
