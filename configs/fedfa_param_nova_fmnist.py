"""FedFa-Param with FedNova normalization on non-IID FMNIST, fully async.

Not in the paper (Table 6 combines FedNova with FedFa-Delta); built the same way.
One local epoch per job, so local steps differ per client (FedNova is FedFa otherwise).

Shared setting: ``fedfa_async_fmnist()`` in configs/paper_settings.py (its docstring
and the results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_async_fmnist()
  c.algorithm = 'fedfa_param_nova'
  c.hparams = {'client_lr': 0.01, 'window_size': 5}
  c.local_epochs = 1
  return c
