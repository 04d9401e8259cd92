"""FedBuff on non-IID FMNIST, a learning-rate grid over 3 seeds in one compiled program.

The validation split (5,000 training samples held out before partitioning) is what a
selection reads (``val_accuracy`` in each run's metrics; the reproductions select on it,
afl_jax/reproduction/scoring.py); the seed varies the data split, the schedule and the
initialization.
"""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  config_lib.set_algorithm(c, 'fedbuff', client_lr=0.05, server_lr=1.0)
  c.validation_size = 5000
  c.num_rounds = 100
  c.sweep = {'hparams': {'client_lr': [0.02, 0.05, 0.1]}, 'seed': [0, 1, 2]}
  return c
