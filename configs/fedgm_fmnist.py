"""FedGM (Sun et al., "On the Role of Server Momentum in FL", Sec. 3 eq. (2)) on FMNIST.

Mirrors the paper's Sec. 6.1 / App. H.1 Table 1 setting: 100 clients, participation
0.05 (5 clients per synchronous round), Dirichlet alpha = 0.5, 3 local epochs of
plain SGD (no local momentum), eta_l = 0.01, and one point of the grid
eta in {0.5, ..., 5.0}, beta in {0.7, 0.9, 0.95}, nu in {0.7, 0.9, 0.95}.

Scaled down for 2 CPU cores: Fashion-MNIST instead of CIFAR-10, the MLP
784-200-200-10 instead of ResNet/VGG, a 10,000-sample training subset (about 100
samples per client, so an epoch is ~3 steps of batch 32), 200 rounds instead of 500.
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedgm_synchronous_fmnist()
  c.algorithm = 'fedgm'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'beta': 0.9, 'nu': 0.7}
  return c
