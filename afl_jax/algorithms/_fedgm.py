"""Server momentum (Sun et al.) with local-SGD clients: FedGM (eq. (2)) and its special cases,
Multistage FedGM (Alg. 3), Autonomous Multistage FedGM (Alg. 4) and FedOPT (Reddi et al. 2021)
(docs/algorithms/fedgm.md)."""

from __future__ import annotations

from collections.abc import Sequence

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm

# Multistage defaults: Fig. 2's eta = (2.0, 1.0, 0.5) with stage lengths and (beta_s, nu_s)
# meeting constraint (3): T_s eta_s = 286 and eta_s beta_s nu_s / (1 - beta_s) = 4.5.
STAGE_LENGTHS = (143, 286, 572)
SERVER_LRS = (2.0, 1.0, 0.5)
BETAS = (0.9, 0.9, 0.9)
NUS = (0.25, 0.5, 1.0)


def _fedgm(name: str, client_lr, server_lr, beta, nu, weighting, autonomous=False) -> Algorithm:
  server = servers.fedgm(server_lr, beta, nu, weighting=weighting)
  client = clients.local_sgd(client_lr)
  return Algorithm(name, clients.divide_by_local_steps(client) if autonomous else client, server)


@register('fedgm', uses=(servers.fedgm,))
def fedgm(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  beta: float = 0.9,
  nu: float = 0.7,
  weighting: str = 'uniform',
) -> Algorithm:
  return _fedgm('fedgm', client_lr, server_lr, beta, nu, weighting)


@register('autonomous_fedgm_single_stage', uses=(servers.fedgm,))
def autonomous_fedgm_single_stage(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  beta: float = 0.9,
  nu: float = 0.7,
  weighting: str = 'uniform',
) -> Algorithm:
  """Alg. 4 with one stage: FedGM whose clients send ``Delta / K_{t,i}``."""
  return _fedgm('autonomous_fedgm_single_stage', client_lr, server_lr, beta, nu, weighting, True)


@register('fedsgd')
def fedsgd(client_lr=0.01, server_lr=1.0, weighting='uniform') -> Algorithm:
  """FedGM(nu=0)."""
  return _fedgm('fedsgd', client_lr, server_lr, 0.0, 0.0, weighting)


@register('fedavgm', uses=(servers.fedgm,))
def fedavgm(client_lr=0.01, server_lr=1.0, beta=0.9, weighting='uniform') -> Algorithm:
  """FedGM(nu=1)."""
  return _fedgm('fedavgm', client_lr, server_lr, beta, 1.0, weighting)


@register('fednag', uses=(servers.fedgm,))
def fednag(client_lr=0.01, server_lr=1.0, beta=0.9, weighting='uniform') -> Algorithm:
  """FedGM(nu=beta)."""
  return _fedgm('fednag', client_lr, server_lr, beta, beta, weighting)


def _multistage(name: str, autonomous: bool, client_lr, weighting, **stages) -> Algorithm:
  client = clients.local_sgd(client_lr)
  return Algorithm(
    name,
    clients.divide_by_local_steps(client) if autonomous else client,
    servers.multistage_fedgm(**stages, weighting=weighting),
  )


@register('multistage_fedgm', uses=(servers.multistage_fedgm,))
def multistage_fedgm(
  client_lr: float = 0.01,
  stage_lengths: Sequence[int] = STAGE_LENGTHS,
  server_lrs: Sequence[float] = SERVER_LRS,
  betas: Sequence[float] = BETAS,
  nus: Sequence[float] = NUS,
  weighting: str = 'uniform',
) -> Algorithm:
  return _multistage('multistage_fedgm', False, **locals())


@register('autonomous_fedgm', uses=(servers.multistage_fedgm,))
def autonomous_fedgm(
  client_lr: float = 0.01,
  stage_lengths: Sequence[int] = STAGE_LENGTHS,
  server_lrs: Sequence[float] = SERVER_LRS,
  betas: Sequence[float] = BETAS,
  nus: Sequence[float] = NUS,
  weighting: str = 'uniform',
) -> Algorithm:
  """Alg. 4: Multistage FedGM whose clients send ``Delta / K_{t,i}``."""
  return _multistage('autonomous_fedgm', True, **locals())


@register('fedopt', uses=(servers.fedopt_optimizer,))
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
  server = servers.fedopt(
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
  )
  return Algorithm('fedopt', clients.local_sgd(client_lr), server)
