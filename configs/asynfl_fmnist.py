"""AsynFL (Yang, Hou, Wu; paper 004, eqs. 2-5) on non-IID Fashion-MNIST with the MLP.

Mirrors Sec. V-A / Fig. 1 / Table III (FMNIST row, MLP, target 75%): Dirichlet(0.4)
label skew, every client trains K local SGD steps every round (continuous local
training, eq. 4), job times ~ Normal, and the server waits a fixed window per round
and aggregates whoever finished (|S_t| varies; eq. 5 divides by n).

Scaled down for 2 CPU cores (the paper does not give K, the duration mean/std or
the window; our choices): n = 20 clients instead of 100, a 12,000-sample training
subset instead of 60,000, batch 32 instead of 128, local learning rate 0.05
instead of 0.01 (to converge within 100 rounds), K = 5 local steps, durations
Normal(mean=10, std=3) s and a 5 s window (about 8 of the 20 clients report per
round, tau_avg ~ 1.5), 100 server rounds evaluated every 5. The MLP is the
784-200-200-10 one (199,210 parameters).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.asynfl_fmnist()
  c.algorithm = 'asynfl'
  return c
