"""FedBuff with FedProx clients (mu = 0.01) on non-IID FMNIST.

FedBuff's event clock, Mc = 10 clients training, a buffer of M = 5 (= FedFa's window K);
200 server steps = 1,000 client updates.

Shared setting: ``fedfa_fmnist()`` in configs/paper_settings.py (its docstring and the
results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'fedbuff_prox'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'mu': 0.01}
  c.schedule.concurrency = 10
  c.schedule.buffer_size = 5
  c.eval_every = 10
  return c
