"""FedProx and FedNova, as variants of FedAvg and FedBuff (and, in ``fedfa.py``, of FedFa).

* FedProx — Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in
  Heterogeneous Networks", MLSys 2020, Alg. 2: the client minimizes
  ``F_k(w) + mu/2 ||w - w^t||^2`` by local SGD (``afl_jax.clients.prox_sgd``); the
  server is unchanged.
* FedNova — Wang, Liu, Liang, Joshi, Poor, "Tackling the Objective Inconsistency
  Problem in Heterogeneous Federated Optimization", NeurIPS 2020, Sec. 5 with plain
  local SGD: ``x <- x - eta_g * tau_eff * mean_i(Delta_i / tau_i)``, ``tau_eff`` the
  mean local steps of the aggregated clients (``afl_jax.servers.nova``); the client
  is unchanged.

Both are *compositions*: :func:`with_prox` swaps an algorithm's client for the
proximal one, :func:`with_nova` puts FedNova's normalization in front of its server.
FedFa's window needs ``tau_eff`` over the window instead, see ``fedfa.py``.

Hyperparameters: ``client_lr`` = eta_l, ``server_lr`` = eta_g (FedBuff's server step),
``mu`` = FedProx's mu.
"""

from __future__ import annotations

import math

from afl_jax import clients, servers
from afl_jax.algorithms import baselines
from afl_jax.algorithms.registry import register
from afl_jax.clients.prox import check_client_lr
from afl_jax.clients.sgd import ScalarOrSchedule
from afl_jax.core.types import Algorithm


def check_server_lr(server_lr: float) -> None:
  """eta_g must be a finite number > 0."""
  if (
    isinstance(server_lr, bool)
    or not isinstance(server_lr, (int, float))
    or not (math.isfinite(server_lr) and server_lr > 0)
  ):
    raise ValueError(f'server_lr must be a finite number > 0; got {server_lr!r}.')


def with_prox(algorithm: Algorithm, name: str, client_lr: ScalarOrSchedule, mu: float) -> Algorithm:
  """``algorithm`` with FedProx's client (eta_l = client_lr, proximal coefficient mu)."""
  return algorithm._replace(name=name, client=clients.prox_sgd(client_lr, mu))


def with_nova(algorithm: Algorithm, name: str) -> Algorithm:
  """``algorithm`` with FedNova's ``tau_eff / tau_i`` rescaling before its (averaging) server."""
  return algorithm._replace(name=name, server=servers.nova(algorithm.server))


@register('fedprox')
def fedprox(client_lr: float = 0.01, mu: float = 0.01) -> Algorithm:
  """FedProx = FedAvg's server + the proximal client: eta_l = client_lr, mu."""
  check_client_lr(client_lr)
  return with_prox(baselines.fedavg(client_lr), 'fedprox', client_lr, mu)


@register('fedbuff_prox')
def fedbuff_prox(client_lr: float = 0.01, server_lr: float = 1.0, mu: float = 0.01) -> Algorithm:
  """FedBuff with the proximal client: eta_l = client_lr, eta_g = server_lr, mu."""
  check_client_lr(client_lr)
  check_server_lr(server_lr)
  return with_prox(baselines.fedbuff(client_lr, server_lr), 'fedbuff_prox', client_lr, mu)


@register('fednova')
def fednova(client_lr: float = 0.01) -> Algorithm:
  """FedNova = FedAvg with normalized averaging: ``x <- x - tau_eff * mean(Delta_i/tau_i)``."""
  check_client_lr(client_lr)
  return with_nova(baselines.fedavg(client_lr), 'fednova')


@register('fedbuff_nova')
def fedbuff_nova(client_lr: float = 0.01, server_lr: float = 1.0) -> Algorithm:
  """FedBuff with normalized averaging: ``x <- x - eta_g tau_eff mean(Delta_i/tau_i)``."""
  check_client_lr(client_lr)
  check_server_lr(server_lr)
  return with_nova(baselines.fedbuff(client_lr, server_lr), 'fedbuff_nova')
