"""FedBuff (Nguyen et al., 2022) in AsynFL's scaled setting (paper 004, Sec. V baseline).

The setting of ``asynfl_fmnist()`` in configs/paper_settings.py (20 clients,
Dirichlet(0.4), 12,000 samples, K = 5, Normal(10, 3) s job times) on FedBuff's event
clock: Mc = 12 jobs in flight, buffer M = 8 (about the 8 reports AsynFL's 5 s window
aggregates per round), eta_g = 1. The paper does not give FedBuff's Mc or M.
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.asynfl_fmnist()
  c.algorithm = 'fedbuff'
  c.hparams = {'client_lr': 0.05, 'server_lr': 1.0}
  c.schedule.kind = 'fedbuff'
  c.schedule.concurrency = 12
  c.schedule.buffer_size = 8
  c.schedule.wait_seconds = 0.0
  return c
