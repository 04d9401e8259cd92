"""FedFa-Param with FedNova normalization on non-IID FMNIST, fully async.

Not in the paper (Table 6 combines FedNova with FedFa-Delta); built the same way.
One local epoch per job, so local steps differ per client (FedNova is FedFa otherwise).

Setting as configs/fedfa_delta_fmnist.py (the reference of scripts/reproduce_fedfa.py):
100 clients, Dirichlet(0.5) over a 15,000-sample FMNIST subset, MLP 784-200-200-10,
one local epoch of batch 32 (here), learning rate 0.01 (the paper's Sec. 5.2 value), Mc = 10
clients training at once, long-tailed log-normal(mu=1, sigma=1) job durations. This
is the paper's CIFAR-10/ResNet-18 setting scaled down for a 2-core CPU.
"""

from afl_jax import paper_settings


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'fedfa_param_nova'
  c.hparams = {'client_lr': 0.01, 'window_size': 5}
  c.local_epochs = 1
  c.schedule.kind = 'fully_async'
  c.schedule.concurrency = 10
  c.num_rounds = 1000
  c.eval_every = 50
  return c
