"""FedFa-Param (Xu et al., IJCAI 2024, Alg. 1 + eq. (3)) on non-IID FMNIST, fully async.

The server model is the mean of the K = 5 windowed client models (Tables 2-3,
Fig. 5 vary K).

Shared setting: ``fedfa_async_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_async_fmnist()
  c.algorithm = 'fedfa_param'
  c.hparams = {'client_lr': 0.01, 'window_size': 5}
  return c
