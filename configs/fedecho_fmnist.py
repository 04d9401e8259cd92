"""FedEcho (Wang, Ma, Chen; paper 002, Alg. 1, eqs. 2-4) on non-IID Fashion-MNIST, MLP.

Mirrors Sec. 5.1 / Table 2 (CIFAR-10, Dir(0.1), large delay) and the Table 7
ablation: N = 50 clients, Dirichlet(0.1) label skew, FedBuff's event clock with
concurrency Mc = 25 and buffer M = 5, Table 1's large-delay job times (each client
assigned once to short U(1,2) / medium U(3,5) / long U(50,80) x 10 s by its sample
count, at most 10% long; ``schedule.kind = 'fedecho_mild'`` gives the mild delay,
long U(10,20)), server distillation with Adam, nu = 5, alpha in [0.2, 0.8]
(``hparams.alpha_mode = 'fixed'`` with ``hparams.alpha`` = 0, 0.5, 1 for Table 7),
eta_l / eta_g = 0.03 / 1.0 (Table 8).

Scaled down for 2 CPU cores (our choices): Fashion-MNIST and the MLP 784-200-200-10
instead of CIFAR-10 and ResNet-18; an 11,000-sample training subset of which 1,000
are held out (labels dropped) as the unlabeled distillation set U (the paper uses
2,000 samples of an external set such as CIFAR-100 or STL10;
``--config.unlabeled_source=digits`` distils on scikit-learn's digits instead, and
the clients keep all 11,000 samples); K = 5 local SGD steps
of batch 32 instead of two local epochs of batch 50; 150 server steps instead of
500; Q = 5 distillation steps per server step on mini-batches of 250 of U (the
paper gives neither Q nor |B|); distillation learning rate 1e-4 instead of 3e-6
(with 750 distillation steps in all, instead of thousands, 3e-6 moves an MLP by
almost nothing; see docs/results/fedecho.md); no weight decay.
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedecho_fmnist()
  c.algorithm = 'fedecho'
  # apply_fn, unlabeled_x and num_clients are filled from the run.
  c.hparams = {
    'client_lr': 0.03,
    'server_lr': 1.0,
    'distill_lr': 1e-4,
    'distill_steps': 5,
    'distill_batch': 250,
    'clip_norm': 5.0,
    'alpha_min': 0.2,
    'alpha_max': 0.8,
    'alpha_mode': 'dynamic',
    'optimizer': 'adam',
  }
  return c
