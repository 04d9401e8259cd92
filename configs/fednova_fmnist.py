"""FedNova (Wang et al., NeurIPS 2020) on non-IID FMNIST, synchronous: Table 6 "Fednova w/o".

FedAvg cohorts of 10 clients with normalized averaging; one local epoch per job so
local steps differ per client (with equal steps FedNova is FedAvg).

Shared setting: ``fedfa_fmnist()`` in configs/paper_settings.py (its docstring and the
results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'fednova'
  c.hparams = {'client_lr': 0.01}
  c.local_epochs = 1
  c.schedule.kind = 'synchronous'
  c.num_rounds = 100
  c.eval_every = 5
  return c
