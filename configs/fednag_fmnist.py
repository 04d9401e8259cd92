"""FedNAG = FedGM with nu = beta (Sun et al., Sec. 3): server Nesterov momentum.

``x <- x - eta [(1 - beta) Delta_t + beta d_{t+1}]``. One of the special cases of
FedGM the paper names (its grid point beta = nu = 0.9 or 0.95). Setting as in the
paper's Table 1 (App. H.1): 100 clients, participation 0.05 (5 per synchronous
round), Dirichlet 0.5, 3 local epochs, eta_l = 0.01.

Shared setting: ``fedgm_synchronous_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedgm_synchronous_fmnist()
  c.algorithm = 'fednag'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'beta': 0.9}
  return c
