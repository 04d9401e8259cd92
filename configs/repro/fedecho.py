"""FedEcho reproduction (paper 002: Wang, Ma, Chen, "Stragglers Can Contribute More"), declared.

CIFAR-10 / ResNet-18, N = 50, Dirichlet 0.1 / 0.3, FedBuff clock Mc = 25, M = 5,
Table 1's delays, distillation on 2,000 unlabeled samples of an external set;
baselines FedBuff, CA2FL, FedAC, FADAS (Table 2). Declared, not yet run with seeds.
"""

from afl_jax.pipeline.config import import_beside

spec = import_beside(__file__, 'spec')

GRID = 3  # settings per method


def scaled(c):
  """configs/fedecho_fmnist.py's setting (every method) + a validation split."""
  c.num_clients = 50
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.1
  c.train_subset = 13000
  c.unlabeled_size = 1000  # every method holds it out, only FedEcho distils on it
  c.validation_size = 2000
  c.model = 'mlp'
  c.local_steps = 5
  c.schedule.kind = 'fedecho_large'
  c.schedule.concurrency = 25
  c.schedule.buffer_size = 5
  c.num_rounds = 300  # long enough that the slowest clients report several times
  c.eval_every = 30
  c.eval_train_samples = 1000


TABLE2 = spec.Experiment(
  key='table2',
  title='Table 2: FedEcho vs FedBuff, CA2FL, FADAS, FedAC under the large delay',
  ref='Table 2 (Dir 0.1, large delay)',
  setting=(
    'N = 50 clients, Dirichlet 0.1, FedBuff clock Mc = 25, M = 5, Table 1 large-delay job '
    'times, Fashion-MNIST, MLP, K = 5 local steps of batch 32, 1,000 held-out unlabeled '
    'FMNIST samples for distillation, 2,000 validation samples, 300 server steps.'
  ),
  base=scaled,
  methods=(
    spec.Method('FedEcho', 'fedecho_fmnist', grid={'hparams.distill_lr': (1e-5, 1e-4, 1e-3)}),
    spec.Method('FedBuff', 'fedbuff_fmnist', grid={'hparams.client_lr': (0.01, 0.03, 0.1)}),
    spec.Method('CA2FL', 'ca2fl_fmnist', grid={'hparams.client_lr': (0.01, 0.03, 0.1)}),
    spec.Method(
      'FADAS',
      'fadas_fmnist',
      grid={'hparams.server_lr': (1e-4, 1e-3, 1e-2)},
      fixed={'hparams.delay_rule': 'divide'},
    ),
    spec.Method('FedAC', 'fedac_fmnist', grid={'hparams.server_lr': (1e-4, 1e-3, 1e-2)}),
  ),
  claims=tuple(
    spec.Claim('Table 2', f'FedEcho achieves higher accuracy than {b}', 'FedEcho', b)
    for b in ('FedBuff', 'CA2FL', 'FADAS', 'FedAC')
  ),
  deviations=(
    'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet-18; distillation on held-out FMNIST, '
    'not an external set (CIFAR-100 / STL10 / generated images).',
    f'Every method gets {GRID} settings on its most sensitive rate.',
  ),
  run=False,
)

PAPER = spec.Paper(
  key='fedecho',
  number='002',
  citation=(
    'Wang, Ma, Chen, *Stragglers Can Contribute More: Uncertainty-Aware Distillation for '
    'Asynchronous Federated Learning*'
  ),
  setting=(
    'ResNet-18 on CIFAR-10, N = 50, Dirichlet 0.1 and 0.3, FedBuff Mc = 25, M = 5, two local '
    'epochs of batch 50, 500 rounds, Table 1 delays, distillation on 2,000 external '
    'unlabeled samples with Adam (eta_d = 3e-6), nu = 5, alpha in [0.2, 0.8].'
  ),
  experiments=(TABLE2,),
  pending=(
    ('Table 2', 'FedBuff and CA2FL suffer pronounced degradation under delays'),
    ('Sec. 5', 'FedEcho is more stable across delay and heterogeneity conditions'),
    ('Table 7', 'dynamic alpha beats alpha = 0, 0.5 and 1'),
  ),
)
