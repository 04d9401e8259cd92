"""CA2FL (Wang et al., ICLR 2024, Alg. 1), the MasFL paper's baseline, on non-IID FMNIST.

Mirrors the MasFL paper's FMNIST setting (Yan et al., Sec. 6, App. E.1): N = 100
clients, Dirichlet alpha = 0.5, FedBuff's event clock with concurrency Mc = 20 and
buffer M = 10, client durations U(0, 20), K local SGD steps, cached-update
calibration on the server with global rate eta = server_lr = 1 (CA2FL's setting)
and local rate eta_l = client_lr = 0.03 (FedBuff's and CA2FL's best of
{0.003, 0.03, 0.3} in a short sweep here).

Scaled down for 2 CPU cores (the whole masfl reproduction grid is ~40 runs):
multinomial logistic regression instead of the paper's 3-conv + 2-FC CNN
(``--config.model=cnn`` or ``mlp`` selects those, but the rates were chosen for
logistic regression); a 12,000-sample training subset (median client ~107
samples); K = 5 local steps of batch 50 (about two local epochs of a median
client); T = 300 server steps instead of 600.
"""

from afl_jax import paper_settings


def get_config():
  c = paper_settings.masfl_fmnist()
  c.algorithm = 'ca2fl'
  c.hparams = {'client_lr': 0.03, 'server_lr': 1.0}
  return c
