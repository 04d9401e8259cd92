"""FedFa-Param with FedProx clients (mu = 0.01) on non-IID FMNIST, fully async.

Not in the paper (Table 6 combines FedProx with FedFa-Delta); built the same way.

Shared setting: ``fedfa_async_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_async_fmnist()
  c.algorithm = 'fedfa_param_prox'
  c.hparams = {'client_lr': 0.01, 'mu': 0.01, 'window_size': 5}
  return c
