"""CA2FL (Wang et al., ICLR 2024, Alg. 1), the MasFL paper's baseline, on non-IID FMNIST.

Mirrors the MasFL paper's FMNIST setting (Yan et al., Sec. 6, App. E.1): N = 100
clients, Dirichlet alpha = 0.5, FedBuff's event clock with concurrency Mc = 20 and
buffer M = 10, client durations U(0, 20), K local SGD steps, cached-update
calibration on the server with global rate eta = server_lr = 1 (CA2FL's setting)
and local rate eta_l = client_lr = 0.03 (FedBuff's and CA2FL's best of
{0.003, 0.03, 0.3} in a short sweep here).

Shared setting: ``masfl_fmnist()`` in configs/paper_settings.py (its docstring and the
results page give the paper's setting and how it is scaled to 2 CPU cores).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.masfl_fmnist()
  c.algorithm = 'ca2fl'
  c.hparams = {'client_lr': 0.03, 'server_lr': 1.0}
  return c
