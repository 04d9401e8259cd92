"""Autonomous FedGM (Sun et al., Alg. 4; Sec. 6.3, Fig. 1(c,d), App. H.1) on FMNIST.

Mirrors the paper's autonomous setting: at every server step 5 of 100 clients
(participation 0.05) report; each started from a global model drawn uniformly from
the last 5 versions (``schedule.window = 5``; App. H.4 / Fig. 9 uses 10) and ran
a local epoch count drawn from {1, ..., 6}, so
K_{t,i} = epochs * ceil(n_i / batch_size) (``local_epochs = 1`` is one epoch,
``schedule.local_steps_multipliers`` the epoch draw). Clients send Delta / K_{t,i}
(Alg. 4 line 7). Dirichlet 0.5, eta_l = 0.01, no local momentum. As in Sec. 6.3
("a grid search as in Section 6.1") one constant (eta, beta, nu) for the whole run:
a single stage; the paper's grid is eta in {0.5, ..., 5.0}, beta and nu in
{0.7, 0.9, 0.95}. nus = (0.0,) is Autonomous FedAvg, nus = (1.0,) Autonomous
FedAvgM. Pass several stages for the multistage version of Alg. 4.

Scaled down for 2 CPU cores: Fashion-MNIST and the MLP 784-200-200-10 instead of
CIFAR-10 and ResNet, a 10,000-sample training subset (an epoch is ~3 steps of
batch 32, K_{t,i} between 1 and 48), 200 server steps instead of 500.
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedgm_fmnist()
  c.algorithm = 'autonomous_fedgm'
  c.hparams = {
    'client_lr': 0.01,
    'stage_lengths': [200],
    'server_lrs': [5.0],
    'betas': [0.9],
    'nus': [0.7],
  }
  c.local_epochs = 1
  c.schedule.kind = 'random_staleness'
  c.schedule.local_steps_multipliers = '1,2,3,4,5,6'
  return c
