"""FedProx (Li et al., MLSys 2020) on non-IID FMNIST, synchronous: Table 6 "Fedprox w/o".

FedAvg cohorts of 10 clients (a round lasts as long as its slowest member), proximal
clients with mu = 0.01; 100 rounds = the 1,000 client updates of the FedFa configs.

Shared setting: ``fedfa_fmnist()`` in configs/paper_settings.py (its docstring and the
results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'fedprox'
  c.hparams = {'client_lr': 0.01, 'mu': 0.01}
  c.schedule.kind = 'synchronous'
  c.num_rounds = 100
  c.eval_every = 5
  return c
