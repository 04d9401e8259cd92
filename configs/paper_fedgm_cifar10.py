"""Paper scale: FedGM on non-IID CIFAR-10 with ResNet-18, the FedGM paper's setting.

Sun, Wu, Huang & Zhang, "On the Role of Server Momentum in Federated Learning"
(paper 003), Sec. 6 / 6.1, Fig. 1(a-b), and App. H.1 Table 1: ResNet on CIFAR-10;
100 clients, participation ratio 0.05 (5 clients per synchronous round), Dirichlet
alpha = 0.5, 3 local epochs of plain SGD (no local momentum) at eta_l = 0.01, 500
rounds. The server rates are one point of the paper's grid eta in {0.5, 1.0, ...,
5.0}, beta in {0.7, 0.9, 0.95}, nu in {0.7, 0.9, 0.95} (the paper reports only the
best curve of each method, not the selected point): eta = 1.0, beta = 0.9, nu = 0.7,
as in configs/fedgm_fmnist.py.

Our choices: batch 32 (the paper gives no batch size); ResNet-18 with GroupNorm
(afl_jax/models/resnet.py; the paper does not say which ResNet), no augmentation.
For Autonomous FedGM (Fig. 1(c-d), App. H.1: a model from the last 5 versions, local
epochs from {1..6}) use ``schedule.kind = 'random_staleness'``.
"""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.algorithm = 'fedgm'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'beta': 0.9, 'nu': 0.7}
  c.dataset = 'cifar10'
  c.model = 'resnet18'
  c.num_clients = 100
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.5
  c.batch_size = 32
  c.local_epochs = 3
  c.schedule.kind = 'synchronous'
  c.schedule.clients_per_step = 5
  c.schedule.durations = 'constant'
  c.schedule.durations_params = 'value=1'
  c.num_rounds = 500
  c.eval_every = 20
  c.eval_train_samples = 5000
  return c
