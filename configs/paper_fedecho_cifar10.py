"""Paper scale: FedEcho on non-IID CIFAR-10 with ResNet-18, the FedEcho paper's setting.

Wang, Ma & Chen, "Stragglers Can Contribute More: Uncertainty-Aware Distillation for
Asynchronous Federated Learning" (paper 002), Sec. 5.1, Table 2 (CIFAR-10,
Dir(0.1), large delay) and App. A.1.1, Table 8: ResNet-18; N = 50 clients,
Dirichlet alpha = 0.1; FedBuff's clock with concurrency Mc = 25 and buffer M = 5;
Table 1's large-delay runtime categories (``schedule.kind = 'fedecho_large'``;
``'fedecho_mild'`` for the mild column); 2 local epochs of batch 50; 500 rounds;
eta_l / eta_g = 0.03 / 1.0 (Table 8); server distillation with Adam at
eta_d = 3e-6, clipping nu = 5, alpha in [0.2, 0.8] (dynamic), on 2,000 unlabeled
samples.

Deviations: the unlabeled set is 2,000 CIFAR-10 training images held out with their
labels dropped (the paper distils on CIFAR-100, STL10 or DDPM samples, which are not
shipped here); no local weight decay (the paper uses 1e-4); the paper gives neither
the number of distillation steps Q per round nor their batch: 5 steps of 250 samples
(as in configs/fedecho_fmnist.py). ResNet-18 with GroupNorm (afl_jax/models/resnet.py).
"""

from afl_jax.pipeline import config as config_lib


def get_config():
  c = config_lib.default()
  c.algorithm = 'fedecho'
  c.hparams = {
    'client_lr': 0.03,
    'server_lr': 1.0,
    'distill_lr': 3e-6,
    'distill_steps': 5,
    'distill_batch': 250,
    'clip_norm': 5.0,
    'alpha_min': 0.2,
    'alpha_max': 0.8,
    'alpha_mode': 'dynamic',
    'optimizer': 'adam',
  }
  c.dataset = 'cifar10'
  c.model = 'resnet18'
  c.num_clients = 50
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.1
  c.unlabeled_size = 2000
  c.batch_size = 50
  c.local_epochs = 2
  c.schedule.kind = 'fedecho_large'
  c.schedule.concurrency = 25
  c.schedule.buffer_size = 5
  c.num_rounds = 500
  c.eval_every = 20
  c.eval_train_samples = 5000
  return c
