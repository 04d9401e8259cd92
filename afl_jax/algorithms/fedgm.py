"""Server momentum: FedGM and its special cases, Multistage / Autonomous FedGM, FedOPT.

Sun, Wu, Huang, Zhang, "On the Role of Server Momentum in Federated Learning":

* 'fedgm'            FedGM, Sec. 3 eq. (2): local SGD (Alg. 2) + QHM server momentum.
* 'fedsgd'           FedGM with nu = 0 (FedAvg with a server learning rate, Sec. 3).
* 'fedavgm'          FedGM with nu = 1 (server heavy ball, Hsu et al. 2019).
* 'fednag'           FedGM with nu = beta (server Nesterov momentum, Sec. 3).
* 'multistage_fedgm' Alg. 3: stagewise (eta_s, beta_s, nu_s) for T_s server steps.
* 'autonomous_fedgm' Alg. 4: Alg. 3's server; clients divide their update by
                     K_{t,i}; heterogeneous K_{t,i} and stale starts come from the
                     schedule (e.g. ``schedules.random_staleness``, App. H.1), and
                     the server steps every m = M collected updates.
* 'fedopt'           FedOPT (Alg. 1; Reddi et al. 2021) with an optax ServerOPT:
                     FedAdam, FedYogi, FedAdagrad, FedAMSGrad, FedSGD.

Hyperparameters: client_lr = eta_l; server_lr = eta (the paper's server learning
rate); beta = momentum factor; nu = instant discount factor; stagewise versions
server_lrs = (eta_s), betas = (beta_s), nus = (nu_s), stage_lengths = (T_s).
FedOPT: beta1, beta2, tau as in Reddi et al. Every factory takes ``weighting``:
'uniform' (default; the paper's mean over S_t) or 'examples' (by ``client_sizes``,
run context, :mod:`afl_jax.servers.weighting`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core import checks
from afl_jax.core.types import Algorithm, ClientRule

# Defaults of the multistage variants: Fig. 2's eta = (2.0, 1.0, 0.5) with stage
# lengths and (beta_s, nu_s) that satisfy constraint (3): W_2 = T_s eta_s = 286 and
# W_1 = eta_s beta_s nu_s / (1 - beta_s) = 4.5 in every stage.
STAGE_LENGTHS = (143, 286, 572)
SERVER_LRS = (2.0, 1.0, 0.5)
BETAS = (0.9, 0.9, 0.9)
NUS = (0.25, 0.5, 1.0)


def _local_sgd(client_lr: float) -> ClientRule:
  checks.positive('client_lr', client_lr)
  return clients.local_sgd(client_lr)


def _fedgm(
  name: str,
  client_lr: float,
  server_lr: float,
  beta: float,
  nu: float,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  server = servers.fedgm(server_lr, beta, nu, weighting=weighting, client_sizes=client_sizes)
  return Algorithm(name, _local_sgd(client_lr), server)


@register('fedgm', context=('client_sizes',))
def fedgm(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  beta: float = 0.9,
  nu: float = 0.7,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """FedGM: eta_l = client_lr, eta = server_lr, momentum beta, instant discount nu."""
  return _fedgm('fedgm', client_lr, server_lr, beta, nu, weighting, client_sizes)


@register('fedsgd', context=('client_sizes',))
def fedsgd(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """FedSGD = FedGM(nu=0): ``x <- x - eta * Delta_t``."""
  return _fedgm('fedsgd', client_lr, server_lr, 0.0, 0.0, weighting, client_sizes)


@register('fedavgm', context=('client_sizes',))
def fedavgm(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  beta: float = 0.9,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """FedAvgM = FedGM(nu=1): ``x <- x - eta * d_{t+1}``."""
  return _fedgm('fedavgm', client_lr, server_lr, beta, 1.0, weighting, client_sizes)


@register('fednag', context=('client_sizes',))
def fednag(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  beta: float = 0.9,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """FedNAG = FedGM(nu=beta): ``x <- x - eta [(1 - beta) Delta_t + beta d_{t+1}]``."""
  return _fedgm('fednag', client_lr, server_lr, beta, beta, weighting, client_sizes)


@register('multistage_fedgm', context=('client_sizes',))
def multistage_fedgm(
  client_lr: float = 0.01,
  stage_lengths: Sequence[int] = STAGE_LENGTHS,
  server_lrs: Sequence[float] = SERVER_LRS,
  betas: Sequence[float] = BETAS,
  nus: Sequence[float] = NUS,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """Multistage FedGM (Alg. 3): stage s runs (eta_s, beta_s, nu_s) for T_s server steps."""
  return Algorithm(
    'multistage_fedgm',
    _local_sgd(client_lr),
    servers.multistage_fedgm(
      stage_lengths, server_lrs, betas, nus, weighting=weighting, client_sizes=client_sizes
    ),
  )


@register('autonomous_fedgm', context=('client_sizes',))
def autonomous_fedgm(
  client_lr: float = 0.01,
  stage_lengths: Sequence[int] = STAGE_LENGTHS,
  server_lrs: Sequence[float] = SERVER_LRS,
  betas: Sequence[float] = BETAS,
  nus: Sequence[float] = NUS,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """Autonomous Multistage FedGM (Alg. 4): clients send ``Delta / K_{t,i}``.

  With K_{t,i} = K and no staleness this equals 'multistage_fedgm' with server
  learning rates ``eta_s / K`` (the FedGM step is linear in Delta).
  """
  return Algorithm(
    'autonomous_fedgm',
    clients.divide_by_local_steps(_local_sgd(client_lr)),
    servers.multistage_fedgm(
      stage_lengths, server_lrs, betas, nus, weighting=weighting, client_sizes=client_sizes
    ),
  )


@register('fedopt', context=('client_sizes',))
def fedopt(
  client_lr: float = 0.01,
  server_lr: float = 0.01,
  server_optimizer: str = 'adam',
  beta1: float = 0.9,
  beta2: float = 0.99,
  tau: float = 1e-3,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """FedOPT with an optax ServerOPT: 'sgd', 'adam', 'yogi', 'adagrad' or 'amsgrad'.

  eta_l = client_lr, eta = server_lr; beta1, beta2 the moment decays and tau the
  adaptivity (optax's eps) of Reddi et al. See ``servers.server_optimizer``.
  """
  return Algorithm(
    'fedopt',
    _local_sgd(client_lr),
    servers.fedopt(
      server_optimizer,
      server_lr,
      beta1=beta1,
      beta2=beta2,
      tau=tau,
      weighting=weighting,
      client_sizes=client_sizes,
    ),
  )
