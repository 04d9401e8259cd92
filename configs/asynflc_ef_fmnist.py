"""AsynFLC-EF (paper 004, Alg. 1, eqs. 8-10): AsynFLC with error feedback, Top-3%.

Mirrors the AsynFLC-EF(top3) curve of Fig. 1/2 and the AsynFLC-EF(top3) entry of
Table III (FMNIST, MLP, target 75%): non-IID Dirichlet(0.4) FMNIST, Normal job
times, waiting-window participation, residuals frozen while a client is absent.
Top-k + QSGD (Fig. 3, "top3+Q4b") by override:
``--config.hparams.compressor=top_k_qsgd --config.hparams.bits=4``.

Shared setting: ``asynfl_fmnist()`` in configs/paper_settings.py (its docstring and the
results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.asynfl_fmnist()
  c.algorithm = 'asynflc_ef'
  c.hparams = {'client_lr': 0.05, 'server_lr': 1.0, 'compressor': 'top_k', 'fraction': 0.03}
  return c
