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

from afl_jax import config as config_lib


def get_config():
  c = config_lib.default()
  c.algorithm = 'ca2fl'
  c.hparams = {'client_lr': 0.03, 'server_lr': 1.0}
  c.dataset = 'fmnist'
  c.num_clients = 100
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.5
  c.train_subset = 12000
  c.model = 'logreg'
  c.batch_size = 50
  c.local_steps = 5
  c.local_epochs = 0
  c.schedule.kind = 'fedbuff'
  c.schedule.concurrency = 20
  c.schedule.buffer_size = 10
  c.schedule.durations = 'uniform'
  c.schedule.durations_params = 'low=0,high=20'
  c.num_rounds = 300
  c.eval_every = 25
  c.eval_train_samples = 1000
  return c
