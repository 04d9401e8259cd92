"""FedSGD = FedGM with nu = 0 (Sun et al., Sec. 3): FedAvg with a server rate eta.

``x <- x - eta * Delta_t``; eta = 1 is FedAvg. This is the "FedAvg" of the paper's
Remark 4.5 / App. H.2 (Fig. 5: eta in {1, 2, 3}, unstable at 2, divergent at 3).
Setting as in the paper's Table 1 (App. H.1): 100 clients, participation 0.05 (5
per synchronous round), Dirichlet 0.5, 3 local epochs, eta_l = 0.01.

Shared setting: ``fedgm_synchronous_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedgm_synchronous_fmnist()
  c.algorithm = 'fedsgd'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0}
  return c
