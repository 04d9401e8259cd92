"""FedProx (Li et al., MLSys 2020) on non-IID FMNIST, synchronous: Table 6 "Fedprox w/o".

FedAvg cohorts of 10 clients (a round lasts as long as its slowest member), proximal
clients with mu = 0.01; 100 rounds = the 1,000 client updates of the FedFa configs.

Setting as configs/fedfa_delta_fmnist.py (the reference of scripts/reproduce_fedfa.py):
100 clients, Dirichlet(0.5) over a 15,000-sample FMNIST subset, MLP 784-200-200-10,
10 local steps of batch 32, learning rate 0.01 (the paper's Sec. 5.2 value), Mc = 10
clients training at once, long-tailed log-normal(mu=1, sigma=1) job durations. This
is the paper's CIFAR-10/ResNet-18 setting scaled down for a 2-core CPU.
"""

from afl_jax import paper_settings


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'fedprox'
  c.hparams = {'client_lr': 0.01, 'mu': 0.01}
  c.schedule.kind = 'synchronous'
  c.num_rounds = 100
  c.eval_every = 5
  return c
