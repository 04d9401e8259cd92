"""FedGM reproduction (paper 003: Sun, Wu, Huang, Zhang, "On the Role of Server Momentum").

Sec. 6.1 / App. H.1 Table 1: 100 clients, participation 0.05 (5 per synchronous
round), Dirichlet 0.5, 3 local epochs of SGD at eta_l = 0.01, 500 rounds, grid
eta in {0.5, 1.0, ..., 5.0}, beta and nu in {0.7, 0.9, 0.95}. FedAvg and FedAvgM are
FedGM at nu = 0 and nu = 1 (Sec. 3), so all three run the same server code.
"""

from afl_jax.pipeline.config import import_beside

spec = import_beside(__file__, 'spec')

ROUNDS = 60


def scaled(c):
  """configs/fedgm_fmnist.py (FMNIST, MLP, 10k samples) + a validation split, 60 rounds."""
  c.num_rounds = ROUNDS
  c.eval_every = 20
  c.validation_size = 2000
  c.eval_train_samples = 1000


SYNC = spec.Experiment(
  key='sync',
  title='Synchronous server momentum: FedGM vs FedAvgM vs FedAvg, and the server rate',
  ref='Sec. 6.1, Fig. 1(a,b), App. H.2 Figs. 3, 5-6; Remark 4.5',
  setting=(
    'configs/fedgm_fmnist.py: synchronous rounds of 5 of 100 clients (Dirichlet 0.5), '
    '3 local epochs of batch 32 at eta_l = 0.01, Fashion-MNIST, MLP 784-200-200-10, '
    f'10,000 training samples of which 2,000 are the validation split, {ROUNDS} rounds, '
    'evaluation every 20 rounds on the full test set.'
  ),
  base=scaled,
  methods=(
    spec.Method(
      'FedAvg',
      'fedgm_fmnist',
      grid={'hparams.server_lr': (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)},
      fixed={'hparams.nu': 0.0},
    ),
    spec.Method(
      'FedAvgM',
      'fedgm_fmnist',
      grid={'hparams.server_lr': (1.0, 3.0, 5.0), 'hparams.beta': (0.7, 0.9)},
      fixed={'hparams.nu': 1.0},
    ),
    spec.Method(
      'FedGM',
      'fedgm_fmnist',
      grid={'hparams.server_lr': (1.0, 3.0, 5.0), 'hparams.nu': (0.7, 0.9)},
      fixed={'hparams.beta': 0.9},
    ),
  ),
  claims=(
    spec.Claim('Sec. 6.1, Fig. 1(a,b)', 'FedGM outperforms FedAvgM', 'FedGM', 'FedAvgM'),
    spec.Claim('Sec. 6.1, Fig. 1(a,b)', 'FedGM outperforms FedAvg', 'FedGM', 'FedAvg'),
    spec.Claim(
      'Sec. 6.1, App. H.2 Fig. 3',
      'FedAvgM is (marginally) better than FedAvg in test accuracy',
      'FedAvgM',
      'FedAvg',
    ),
    spec.Claim(
      'Remark 4.5, App. H.2 Figs. 5-6',
      'at eta = 3 FedGM beats FedAvg (the paper: FedAvg diverges at eta = 3)',
      'FedGM',
      'FedAvg',
      at={'hparams.server_lr': 3.0},
    ),
    spec.Claim(
      'Remark 4.5, App. H.2 Figs. 5-6',
      'at eta = 5 FedGM beats FedAvg (the paper: FedGM converges, FedAvg diverges)',
      'FedGM',
      'FedAvg',
      at={'hparams.server_lr': 5.0},
    ),
  ),
  axis='hparams.server_lr',
  deviations=(
    'Remark 4.5 is scored as "FedGM beats FedAvg at the same eta"; whether FedAvg diverges '
    'is the "diverged runs" column (a non-finite loss).',
    'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet/VGG; 10k training samples; '
    f'{ROUNDS} instead of 500 rounds.',
    'Grid budget of 6 settings per method (the paper sweeps eta in 10 values x beta x nu): '
    'FedAvg eta in {0.5, 1, 2, 3, 4, 5}; FedAvgM eta in {1, 3, 5} x beta in {0.7, 0.9}; '
    'FedGM eta in {1, 3, 5} x nu in {0.7, 0.9} at beta = 0.9.',
    'Settings are selected on a held-out validation split (the paper does not say how it selects).',
  ),
)

PAPER = spec.Paper(
  key='fedgm',
  number='003',
  citation='Sun, Wu, Huang, Zhang, *On the Role of Server Momentum in Federated Learning*',
  setting=(
    'ResNet/VGG on CIFAR-10, 100 clients, participation 0.05, Dirichlet 0.5, 3 local '
    'epochs, eta_l = 0.01, 500 rounds, eta in {0.5, ..., 5.0}, beta and nu in '
    '{0.7, 0.9, 0.95} (App. H.1, Table 1).'
  ),
  experiments=(SYNC,),
  pending=(
    (
      'Sec. 6.2, Fig. 2',
      'Multistage FedGM (stagewise eta, beta, nu) beats constant-eta FedGM',
    ),
    (
      'Sec. 6.3, Fig. 1(c,d), App. H.4',
      'Autonomous FedGM beats Autonomous FedAvg and is within a small margin of ideal FedGM',
    ),
  ),
)
