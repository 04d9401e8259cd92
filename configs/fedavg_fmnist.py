"""FedAvg (McMahan et al., 2017) on non-IID FMNIST: synchronous cohorts of 10 clients."""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.algorithm = 'fedavg'
  c.hparams = {'client_lr': 0.05}
  c.schedule.kind = 'synchronous'
  c.schedule.clients_per_step = 10
  return c
