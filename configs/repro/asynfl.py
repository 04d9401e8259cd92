"""AsynFL reproduction (paper 004: Yang, Hou, Wu, "Convergence Analysis of AFL with
Gradient Compression"): headline claims, not yet rerun with seeds."""

from afl_jax.pipeline.config import import_beside

spec = import_beside(__file__, 'spec')

PAPER = spec.Paper(
  key='asynfl',
  number='004',
  citation=(
    'Yang, Hou, Wu, *Convergence Analysis of Asynchronous Federated Learning with Gradient '
    'Compression for Non-Convex Optimization*'
  ),
  setting=(
    'n = 100 clients, Dirichlet(0.4), MLP at eta_l = 0.01, batch 128, MNIST/FMNIST, Normal '
    'job times, a fixed server waiting window (Sec. V).'
  ),
  experiments=(),
  pending=(
    ('Obs. 1, Table III', 'AsynFL and AsynFLC-EF converge faster than FedBuff, with less upload'),
    ('Obs. 4-6, Table III', 'AsynFLC-EF matches AsynFL while uploading 10-100x less'),
    ('Obs. 3', 'AsynFLC(top3) without EF converges worse and unstably on non-IID data'),
    ('Obs. 8-9, Fig. 5', 'AsynFLC(Sign) without EF fails on non-IID data, converges on IID'),
  ),
)
