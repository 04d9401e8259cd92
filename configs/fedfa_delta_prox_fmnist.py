"""FedFa-Delta with FedProx clients (mu = 0.01) on non-IID FMNIST: Table 6 "Fedprox w/".

Compare with configs/fedprox_fmnist.py (Table 6 "Fedprox w/o").

Shared setting: ``fedfa_async_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_async_fmnist()
  c.algorithm = 'fedfa_delta_prox'
  c.hparams = {'client_lr': 0.01, 'server_lr': 1.0, 'mu': 0.01, 'window_size': 5}
  return c
