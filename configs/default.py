"""Shared default: FedBuff on non-IID Fashion-MNIST (Dirichlet 0.5), MLP 784-200-200-10.

Sized for a fresh 2-core machine: 100 clients, Mc=20, M=10, 10 local steps of
batch 32, 200 server steps (a few minutes). Override any field on the command line.
"""

from afl_jax.pipeline import config as config_lib


def get_config():
  return config_lib.default()
