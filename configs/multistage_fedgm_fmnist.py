"""Multistage FedGM (Sun et al., Alg. 3; Sec. 6.2, Fig. 2) on FMNIST.

Mirrors Fig. 2: three stages with eta = (2.0, 1.0, 0.5) and (beta_s, nu_s) chosen
so that constraint (3) holds, i.e. W_2 = T_s eta_s and W_1 = eta_s beta_s nu_s /
(1 - beta_s) are the same in every stage: beta_s = 0.9, nu_s = (0.25, 0.5, 1.0),
and stage lengths in the ratio 1 : 2 : 4. Table 1 setting otherwise: 100 clients,
participation 0.05 (5 per synchronous round), Dirichlet 0.5, 3 local epochs,
eta_l = 0.01.

Scaled down for 2 CPU cores: Fashion-MNIST and the MLP 784-200-200-10 instead of
CIFAR-10 and ResNet, a 10,000-sample training subset, 200 rounds split
(29, 57, 114) instead of the paper's 500 rounds. The last stage's values hold for
any rounds past 200.
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedgm_synchronous_fmnist()
  c.algorithm = 'multistage_fedgm'
  c.hparams = {
    'client_lr': 0.01,
    'stage_lengths': [29, 57, 114],
    'server_lrs': [2.0, 1.0, 0.5],
    'betas': [0.9, 0.9, 0.9],
    'nus': [0.25, 0.5, 1.0],
  }
  return c
