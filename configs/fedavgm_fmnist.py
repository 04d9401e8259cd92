"""FedAvgM = FedGM with nu = 1 (Sun et al., Sec. 3): damped server heavy ball.

``d <- (1 - beta) Delta_t + beta d``, ``x <- x - eta d`` (Hsu et al.'s FedAvgM at
rate eta (1 - beta)). Mirrors the paper's Sec. 6.1 baseline (Fig. 1(a,b)) with its
Table 1 setting: 100 clients, participation 0.05 (5 per synchronous round),
Dirichlet 0.5, 3 local epochs, eta_l = 0.01, beta from {0.7, 0.9, 0.95}.

Shared setting: ``fedgm_synchronous_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedgm_synchronous_fmnist()
  c.algorithm = 'fedavgm'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'beta': 0.9}
  return c
