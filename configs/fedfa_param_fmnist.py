"""FedFa-Param (Xu et al., IJCAI 2024, Alg. 1 + eq. (3)) on non-IID FMNIST, fully async.

The server model is the mean of the K = 5 windowed client models (Tables 2-3,
Fig. 5 vary K).

Setting as configs/fedfa_delta_fmnist.py (the reference of scripts/reproduce_fedfa.py):
100 clients, Dirichlet(0.5) over a 15,000-sample FMNIST subset, MLP 784-200-200-10,
10 local steps of batch 32, learning rate 0.01 (the paper's Sec. 5.2 value), Mc = 10
clients training at once, long-tailed log-normal(mu=1, sigma=1) job durations. This
is the paper's CIFAR-10/ResNet-18 setting scaled down for a 2-core CPU.
"""

from afl_jax import paper_settings


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'fedfa_param'
  c.hparams = {'client_lr': 0.01, 'window_size': 5}
  c.schedule.kind = 'fully_async'
  c.schedule.concurrency = 10
  c.num_rounds = 1000
  c.eval_every = 50
  return c
