"""AsynFLC (paper 004, eq. 7): AsynFL with Top-3% compressed uploads, NO error feedback.

Mirrors the AsynFLC(top3) curve of Fig. 1 and the AsynFLC(top3) entry of Table III
(FMNIST, MLP, target 75%): non-IID Dirichlet(0.4) FMNIST, Normal job times,
waiting-window participation. Other compressors by override, e.g.
``--config.hparams.compressor=sign`` (then drop ``fraction``) for AsynFLC(Sign)
of Fig. 5.

Shared setting: ``asynfl_fmnist()`` in configs/paper_settings.py (its docstring and the
results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.asynfl_fmnist()
  c.algorithm = 'asynflc'
  c.hparams = {'client_lr': 0.05, 'server_lr': 1.0, 'compressor': 'top_k', 'fraction': 0.03}
  return c
