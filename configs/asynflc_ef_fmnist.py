"""AsynFLC-EF (paper 004, Alg. 1, eqs. 8-10): AsynFLC with error feedback, Top-3%.

Mirrors the AsynFLC-EF(top3) curve of Fig. 1/2 and the AsynFLC-EF(top3) entry of
Table III (FMNIST, MLP, target 75%): non-IID Dirichlet(0.4) FMNIST, Normal job
times, waiting-window participation, residuals frozen while a client is absent.
Top-k + QSGD (Fig. 3, "top3+Q4b") by override:
``--config.hparams.compressor=top_k_qsgd --config.hparams.bits=4``.

Scaled down for 2 CPU cores exactly as ``configs/asynfl_fmnist.py``: n = 20 clients
(paper 100), 12,000 training samples, batch 32 (paper 128), local learning rate
0.05 (paper 0.01), K = 5, durations Normal(10, 3) s with a 5 s window, 100 rounds.
"""

from afl_jax import paper_settings


def get_config():
  c = paper_settings.asynfl_fmnist()
  c.algorithm = 'asynflc_ef'
  c.hparams = {'client_lr': 0.05, 'server_lr': 1.0, 'compressor': 'top_k', 'fraction': 0.03}
  return c
