"""FedAsync (Xie et al., 2019) on non-IID FMNIST: fully asynchronous, Mc=20."""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.algorithm = 'fedasync'
  c.hparams = {'client_lr': 0.05, 'alpha': 0.6, 'staleness': 'polynomial', 'a': 0.5}
  c.schedule.kind = 'fully_async'
  c.num_rounds = 1000
  c.eval_every = 100
  return c
