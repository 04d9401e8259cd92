"""AdaMasFL (Yan et al., "Momentum-Driven Adaptivity", Alg. 3-4, Thm. 4.1) on non-IID FMNIST.

Mirrors the paper's FMNIST setting (Sec. 6, App. E.1): N = 100 clients, Dirichlet
alpha = 0.5, FedBuff's event clock with concurrency Mc = 20 and buffer S = M = 10,
client durations U(0, 20), plain local SGD steps. The rates are the tuning-free
ones of Theorem 4.1, taken from the run by the pipeline: with S = 10, K = 5,
T = 300 they are eta = 1/(K sqrt T) = 0.0115, gamma = (SK)^{1/4} / T^{3/4} = 0.0369,
beta = sqrt(SK/T) = 0.408 (no hparams are set here on purpose).

Scaled down for 2 CPU cores (the whole masfl reproduction grid is ~40 runs):
multinomial logistic regression instead of the paper's 3-conv + 2-FC CNN
(``--config.model=cnn`` or ``mlp`` selects those); a 12,000-sample training subset
(median client ~107 samples); K = 5 local steps of batch 50 (about two local
epochs of a median client, the paper's "2 epochs of batch 100" on ~600 samples is
~12 steps); T = 300 server steps instead of 600.
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.masfl_fmnist()
  c.algorithm = 'adamasfl'
  c.hparams = {}
  return c
