"""Paper scale: AdaMasFL on non-IID CIFAR-10 with ResNet-18, the MasFL paper's own setting.

Yan, Zhong, Wang & Zhang, "Momentum-Driven Adaptivity: Towards Tuning-Free
Asynchronous Federated Learning" (paper 000), Sec. 5 and App. E.1, Fig. 1(b):
CIFAR-10 with ResNet-18; N = 100 clients, Dirichlet alpha = 0.5; FedBuff's event
clock with concurrency Mc = 20 and buffer S = 10; job durations U(0, 20) s; 2 local
epochs of SGD with batch 100; T = 600 global rounds.

Rates: the paper's tuning-free method. AdaMasFL's rates are Theorem 4.1's functions
of S, K, T only (gamma = (SK)^{1/4} / T^{3/4}, eta = 1 / (K sqrt T),
beta = sqrt(SK / T)), taken from the run (K = the median client's steps), so no
hparams are set. MasFL's Theorem 3.1 rates need the unknown smoothness L; for MasFL
pass ``--config.algorithm=masfl --config.hparams.client_lr=... --config.hparams.server_lr=...``.

Deviations (ours): ResNet-18 uses GroupNorm, not BatchNorm (afl_jax/models/resnet.py);
no data augmentation. Needs the CIFAR-10 binary files (afl_jax/data/cifar10.py) and,
in practice, an accelerator: ``python scripts/estimate.py --config=configs/paper_masfl_cifar10.py``
prints its memory and time before anything big starts.
"""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.algorithm = 'adamasfl'
  c.hparams = {}
  c.dataset = 'cifar10'
  c.model = 'resnet18'
  c.num_clients = 100
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.5
  c.batch_size = 100
  c.local_epochs = 2
  c.schedule.kind = 'fedbuff'
  c.schedule.concurrency = 20
  c.schedule.buffer_size = 10
  c.schedule.durations = 'uniform'
  c.schedule.durations_params = 'low=0,high=20'
  c.num_rounds = 600
  c.eval_every = 20
  c.eval_train_samples = 5000
  return c
