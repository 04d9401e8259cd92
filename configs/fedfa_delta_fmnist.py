"""FedFa-Delta (Xu et al., IJCAI 2024, Alg. 1 + eq. (4)) on non-IID FMNIST, fully async.

Mirrors the paper's CIFAR-10 non-IID experiment (Sec. 5.2, Tables 2-3): 100 clients
with a Dirichlet non-IID partition, 10 clients training at once (Mc = 10), one
server update per arrival (no buffer barrier), a sliding window of K = 5 arrivals,
learning rate 0.01 and local mini-batches of 32 as in Sec. 5.2, and long-tailed
per-job delays ("more clients with faster ... speeds and fewer clients with slower
speeds"): log-normal durations, median e ~ 2.7, mean e^1.5 ~ 4.5, 99th pct ~ 28.

Scaled down for a 2-core CPU: ResNet-18 on CIFAR-10 -> the MLP 784-200-200-10 on a
15,000-sample subset of Fashion-MNIST (Dirichlet alpha = 0.5, ~150 samples per
client); E = 10 local epochs -> 10 local steps (~2 epochs of an average client);
1,000 arrivals (= server steps = client updates) instead of training to
convergence. This file is the reference setting of scripts/reproduce.py --paper=fedfa,
which copies its data/model/delay fields onto the baselines.
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_async_fmnist()
  c.algorithm = 'fedfa_delta'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'window_size': 5}
  return c
