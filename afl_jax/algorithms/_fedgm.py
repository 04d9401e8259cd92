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
                     FedAdam, FedYogi, FedAdagrad, FedAMSGrad, FedSGD; or Reddi
                     et al.'s Alg. 2 as written (convention='alg2').

Hyperparameters: client_lr = eta_l; server_lr = eta (the paper's server learning
rate); beta = momentum factor; nu = instant discount factor; stagewise versions
server_lrs = (eta_s), betas = (beta_s), nus = (nu_s), stage_lengths = (T_s).
FedOPT: beta1, beta2, tau as in Reddi et al. Every factory takes ``weighting``:
'uniform' (default; the paper's mean over S_t) or 'examples' (by the example counts
the messages carry, :mod:`afl_jax.servers.weighting`). Equations and readings:
(docs/algorithms/fedgm.md, "Equations as implemented"), (docs/algorithms/fedgm.md,
"Readings taken").
"""

from __future__ import annotations

from collections.abc import Sequence

from afl_jax import clients, servers
from afl_jax.algorithms.registry import Variant, register, register_family
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.adaptive import TAU_PLACEMENTS
from afl_jax.servers.fedgm import CONVENTIONS, OPTIMIZERS

# Defaults of the multistage variants: Fig. 2's eta = (2.0, 1.0, 0.5) with stage
# lengths and (beta_s, nu_s) that satisfy constraint (3): W_2 = T_s eta_s = 286 and
# W_1 = eta_s beta_s nu_s / (1 - beta_s) = 4.5 in every stage.
STAGE_LENGTHS = (143, 286, 572)
SERVER_LRS = (2.0, 1.0, 0.5)
BETAS = (0.9, 0.9, 0.9)
NUS = (0.25, 0.5, 1.0)


def _fedgm(
  name: str,
  client_lr: float,
  server_lr: float,
  weighting: str,
  beta: float = 0.0,
  nu: float = 0.0,
  nesterov: bool = False,
) -> Algorithm:
  nu = beta if nesterov else nu
  server = servers.fedgm_server(server_lr, beta, nu, weighting=weighting)
  return Algorithm(name, clients.local_sgd(client_lr), server)


# FedGM's hyperparameters with their defaults, in signature order; its special cases
# fix nu (and beta) instead of taking them.
PARAMS = {'client_lr': 0.01, 'server_lr': 1.0, 'beta': 0.9, 'nu': 0.7, 'weighting': 'uniform'}

# The registered factories, by name (what ``algorithms.get(name)`` builds with).
FEDGM = register_family(
  _fedgm,
  PARAMS,
  {
    'fedgm': Variant(
      'FedGM: eta_l = client_lr, eta = server_lr, momentum beta, instant discount nu.'
    ),
    'fedsgd': Variant(
      'FedSGD = FedGM(nu=0): ``x <- x - eta * Delta_t``.',
      omit=('beta', 'nu'),
      fixed={'beta': 0.0, 'nu': 0.0},
    ),
    'fedavgm': Variant(
      'FedAvgM = FedGM(nu=1): ``x <- x - eta * d_{t+1}``.', omit=('nu',), fixed={'nu': 1.0}
    ),
    'fednag': Variant(
      'FedNAG = FedGM(nu=beta): ``x <- x - eta [(1 - beta) Delta_t + beta d_{t+1}]``.',
      omit=('nu',),
      fixed={'nesterov': True},
    ),
  },
  specs={'beta': checks.real(0.0, 1.0, high_open=True), 'nu': checks.real(0.0, 1.0)},
)


# Alg. 3-4's per-stage schedules, checked the same way for both multistage variants.
STAGES = {
  'stage_lengths': checks.integers(1),
  'server_lrs': checks.reals(0.0, low_open=True),
  'betas': checks.reals(0.0, 1.0, high_open=True),
  'nus': checks.reals(0.0, 1.0),
}

# The multistage variants' hyperparameters with their defaults, in signature order.
STAGE_PARAMS = {
  'client_lr': 0.01,
  'stage_lengths': STAGE_LENGTHS,
  'server_lrs': SERVER_LRS,
  'betas': BETAS,
  'nus': NUS,
  'weighting': 'uniform',
}


def _multistage(
  name: str,
  autonomous: bool,
  client_lr: float,
  stage_lengths: Sequence[int],
  server_lrs: Sequence[float],
  betas: Sequence[float],
  nus: Sequence[float],
  weighting: str,
) -> Algorithm:
  client = clients.local_sgd(client_lr)
  return Algorithm(
    name,
    clients.divide_by_local_steps(client) if autonomous else client,
    servers.multistage_fedgm(stage_lengths, server_lrs, betas, nus, weighting=weighting),
  )


MULTISTAGE = register_family(
  _multistage,
  STAGE_PARAMS,
  {
    'multistage_fedgm': Variant(
      'Multistage FedGM (Alg. 3): stage s runs (eta_s, beta_s, nu_s) for T_s server steps.',
      fixed={'autonomous': False},
    ),
    'autonomous_fedgm': Variant(
      """Autonomous Multistage FedGM (Alg. 4): clients send ``Delta / K_{t,i}``.

With K_{t,i} = K and no staleness this equals 'multistage_fedgm' with server
learning rates ``eta_s / K`` (the FedGM step is linear in Delta).
""",
      fixed={'autonomous': True},
    ),
  },
  specs=STAGES,
)


@register(
  'fedopt',
  server_optimizer=checks.choice(OPTIMIZERS),
  tau=checks.POSITIVE,
  convention=checks.choice(CONVENTIONS),
  bias_correction=checks.boolean(),
  bias_correction_offset=checks.integer(1),
  tau_placement=checks.choice(TAU_PLACEMENTS),
  initial_accumulator=checks.real(0.0),
)
def fedopt(
  client_lr: float = 0.01,
  server_lr: float = 0.01,
  server_optimizer: str = 'adam',
  beta1: float = 0.9,
  beta2: float = 0.99,
  tau: float = 1e-3,
  weighting: str = 'uniform',
  convention: str = 'optax',
  bias_correction: bool = False,
  bias_correction_offset: int = 1,
  tau_placement: str = 'outside',
  initial_accumulator: float | None = None,
) -> Algorithm:
  """FedOPT with a ServerOPT: 'sgd', 'adam', 'yogi', 'adagrad' or 'amsgrad'.

  eta_l = client_lr, eta = server_lr; beta1, beta2 the moment decays and tau the
  adaptivity (optax's eps) of Reddi et al. ``convention='optax'`` (default) uses optax's
  transforms; ``'alg2'`` is Reddi et al.'s Alg. 2 as written, with the variants
  ``bias_correction``, ``bias_correction_offset``, ``tau_placement`` and
  ``initial_accumulator`` (v_{-1}; None: tau^2). See ``servers.server_optimizer`` and
  docs/algorithms/baselines.md.
  """
  return Algorithm(
    'fedopt',
    clients.local_sgd(client_lr),
    servers.fedopt(
      server_optimizer,
      server_lr,
      beta1=beta1,
      beta2=beta2,
      tau=tau,
      convention=convention,
      bias_correction=bias_correction,
      bias_correction_offset=bias_correction_offset,
      tau_placement=tau_placement,
      initial_accumulator=initial_accumulator,
      weighting=weighting,
    ),
  )
