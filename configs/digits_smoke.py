"""A tiny run on scikit-learn's digits (no download, seconds): for tests and first tries."""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.dataset = 'digits'
  c.model = 'mlp'
  c.num_clients = 20
  c.schedule.concurrency = 6
  c.schedule.buffer_size = 3
  c.local_steps = 5
  c.batch_size = 16
  config_lib.set_algorithm(c, 'fedbuff', client_lr=0.1, server_lr=1.0)
  c.num_rounds = 40
  c.eval_every = 10
  c.eval_train_samples = 500
  return c
