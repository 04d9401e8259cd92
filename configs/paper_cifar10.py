"""Paper scale: each paper's own CIFAR-10 experiment, ``configs/paper_cifar10.py:<paper>``.

  python scripts/estimate.py --config=configs/paper_cifar10.py:fedgm

One entry per paper (000-004): its dataset, model, clients, schedule, local work, rounds
and rates. docs/paper_scale.md tabulates them and gives, per paper, the sections and
tables each number comes from and our choice for every number the paper does not give.
ResNet-18 uses GroupNorm (afl_jax/models/resnet.py), no data augmentation.
"""

from afl_jax.pipeline import config as config_lib

fmnist = config_lib.import_beside(__file__, 'fmnist')

# Every paper's main experiment: non-IID (Dirichlet) CIFAR-10, ResNet-18.
SHARED = {
  'dataset': 'cifar10',
  'model': 'resnet18',
  'partition': 'dirichlet',
  'eval_train_samples': 5000,
}

PAPERS = {
  # MasFL (Yan et al., paper 000), Sec. 5, App. E.1, Fig. 1(b): AdaMasFL with Thm 4.1's
  # rates from the run (no hparams); S = 10, Mc = 20, U(0, 20) s, 2 epochs of batch 100.
  'masfl': (
    {
      'algorithm': 'adamasfl',
      'num_clients': 100,
      'dirichlet_alpha': 0.5,
      'batch_size': 100,
      'local_epochs': 2,
      'schedule.kind': 'fedbuff',
      'schedule.concurrency': 20,
      'schedule.buffer_size': 10,
      'schedule.durations': 'uniform',
      'schedule.durations_params': {'low': 0.0, 'high': 20.0},
      'num_rounds': 600,
      'eval_every': 20,
    },
    {},
  ),
  # FedFa (Xu et al., paper 001), Sec. 5.2, Tables 2-3: FedFa-Delta, K = 5, Mc = 10, E = 10
  # epochs of 32; ours: Dir(0.5), LogNormal(1, 1) s times a per-client speed, T = 1,000.
  'fedfa': (
    {
      'algorithm': 'fedfa_delta',
      'num_clients': 100,
      'dirichlet_alpha': 0.5,
      'batch_size': 32,
      'local_epochs': 10,
      'schedule.kind': 'fully_async',
      'schedule.concurrency': 10,
      'schedule.durations': 'lognormal',
      'schedule.durations_params': {'mu': 1.0, 'sigma': 1.0},
      'schedule.client_speed': 'lognormal',
      'schedule.client_speed_sigma': 0.5,
      'num_rounds': 1000,
      'eval_every': 25,
      'target_accuracy': 0.6,
    },
    {'client_lr': 0.01, 'server_lr': 1.0, 'window_size': 5},
  ),
  # FedEcho (Wang, Ma, Chen; paper 002), Sec. 5.1, Table 2 (Dir 0.1, large delay), Table 8
  # rates; ours: 2,000 held-out CIFAR-10 images as the unlabeled set, Q = 5 steps of 250.
  'fedecho': (
    {
      'algorithm': 'fedecho',
      'num_clients': 50,
      'dirichlet_alpha': 0.1,
      'unlabeled_size': 2000,
      'batch_size': 50,
      'local_epochs': 2,
      'schedule.kind': 'fedecho_large',
      'schedule.concurrency': 25,
      'schedule.buffer_size': 5,
      'num_rounds': 500,
      'eval_every': 20,
    },
    # FMNIST's FedEcho rates (configs/fmnist.py) but distilling at Table 8's eta_s = 3e-6.
    fmnist.CONFIGS['fedecho'][1] | {'distill_lr': 3e-6},
  ),
  # FedGM (Sun et al., paper 003), Sec. 6.1, App. H.1 Table 1: 5 of 100 per synchronous
  # round, 3 epochs at eta_l = 0.01, one grid point (eta, beta, nu); ours: batch 32.
  'fedgm': (
    {
      'algorithm': 'fedgm',
      'num_clients': 100,
      'dirichlet_alpha': 0.5,
      'batch_size': 32,
      'local_epochs': 3,
      'schedule.kind': 'synchronous',
      'schedule.clients_per_step': 5,
      'schedule.durations': 'constant',
      'schedule.durations_params': {'value': 1.0},
      'num_rounds': 500,
      'eval_every': 20,
    },
    {'client_lr': 0.01, 'server_lr': 1.0, 'beta': 0.9, 'nu': 0.7},
  ),
  # AsynFL (Yang, Hou, Wu; paper 004), Sec. V-A, Table III (CNN, CIFAR-10, 55%): Dir(0.4),
  # batch 128, a 500 s window; ours: the CNN, K = 5, Normal(600, 150) s jobs, T = 500.
  'asynfl': (
    {
      'algorithm': 'asynfl',
      'model': 'cnn',
      'num_clients': 100,
      'dirichlet_alpha': 0.4,
      'batch_size': 128,
      'local_steps': 5,
      'schedule.kind': 'waiting_windows',
      'schedule.wait_seconds': 500.0,
      'schedule.durations': 'normal',
      'schedule.durations_params': {'mean': 600.0, 'std': 150.0},
      'num_rounds': 500,
      'eval_every': 10,
      'target_accuracy': 0.55,
    },
    {'client_lr': 0.01, 'server_lr': 1.0},
  ),
}


def get_config(name: str = ''):
  """The paper-scale config of the paper ``name`` (a key of :data:`PAPERS`)."""
  fields, hparams = config_lib.entry(PAPERS, name, 'configs/paper_cifar10.py')
  return config_lib.build(SHARED | fields, hparams)
