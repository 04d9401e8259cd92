"""MasFL (Yan et al., "Momentum-Driven Adaptivity", Alg. 1-2, Thm. 3.1) on non-IID FMNIST.

Mirrors the paper's FMNIST setting (Sec. 6, App. E.1): N = 100 clients, Dirichlet
alpha = 0.5, FedBuff's event clock with concurrency Mc = 20 and buffer S = M = 10,
client durations U(0, 20), plain local SGD steps. beta is Theorem 3.1's
sqrt(SK/T) = 0.408 (taken from the run). Theorem 3.1's eta and gamma need the
unknown smoothness L, and its condition T >= sqrt(SKT) + 4 S K tau_max^2 fails at
this size (and at the paper's own T = 600, S K ~ 120, tau_max = 4), so the two
rates are set explicitly: gamma = server_lr = 0.1 (best of {0.1, 0.3, 1.0} in a
short sweep at eta = 0.03) and eta = client_lr = 0.03.

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
  c.algorithm = 'masfl'
  c.hparams = {'client_lr': 0.03, 'server_lr': 0.1}
  return c
