"""FedBuff (Nguyen et al., 2022) on non-IID FMNIST with FedBuff's event clock."""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.algorithm = 'fedbuff'
  c.hparams = {'client_lr': 0.05, 'server_lr': 1.0}
  return c
