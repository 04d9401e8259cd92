"""FedOPT (Reddi et al. 2021; Alg. 1 of Sun et al.) with ServerOPT = Adam on FMNIST.

FedAdam on the mean pseudo-gradient (optax ``adam``, bias-corrected; beta1 = 0.9,
beta2 = 0.99, tau = 1e-3 as Reddi et al.), the adaptive-server baseline the paper
discusses next to FedGM. Setting of the paper's Table 1 (App. H.1): 100 clients,
participation 0.05 (5 per synchronous round), Dirichlet 0.5, 3 local epochs,
eta_l = 0.01; server rate eta = 0.01 (Reddi et al.'s range, not the FedGM grid).

Shared setting: ``fedgm_synchronous_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedgm_synchronous_fmnist()
  c.algorithm = 'fedopt'
  c.hparams = {
    'client_lr': 0.01,
    'server_lr': 0.01,
    'server_optimizer': 'adam',
    'beta1': 0.9,
    'beta2': 0.99,
    'tau': 0.001,
  }
  return c
