"""FedBuff with FedProx clients (mu = 0.01) on non-IID FMNIST.

FedBuff's event clock, Mc = 10 clients training, a buffer of M = 5 (= FedFa's window K);
200 server steps = 1,000 client updates.

Setting as configs/fedfa_delta_fmnist.py (the reference of scripts/reproduce_fedfa.py):
100 clients, Dirichlet(0.5) over a 15,000-sample FMNIST subset, MLP 784-200-200-10,
10 local steps of batch 32, learning rate 0.01 (the paper's Sec. 5.2 value), Mc = 10
clients training at once, long-tailed log-normal(mu=1, sigma=1) job durations. This
is the paper's CIFAR-10/ResNet-18 setting scaled down for a 2-core CPU.
"""

from afl_jax import paper_settings


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'fedbuff_prox'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'mu': 0.01}
  c.schedule.concurrency = 10
  c.schedule.buffer_size = 5
  c.eval_every = 10
  return c
