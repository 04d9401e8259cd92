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

from afl_jax import clients, servers
from afl_jax.algorithms import baselines
from afl_jax.algorithms.registry import register
from afl_jax.clients.prox import check_client_lr
from afl_jax.clients.sgd import ScalarOrSchedule
from afl_jax.core import checks
from afl_jax.core.types import Algorithm


def check_server_lr(server_lr: float) -> None:
  """eta_g must be a finite number > 0."""
  checks.positive('server_lr', server_lr)


def with_prox(algorithm: Algorithm, name: str, client_lr: ScalarOrSchedule, mu: float) -> Algorithm:
  """``algorithm`` with FedProx's client (eta_l = client_lr, proximal coefficient mu)."""
  return algorithm._replace(name=name, client=clients.prox_sgd(client_lr, mu))


def with_nova(algorithm: Algorithm, name: str, weighting: str = 'uniform') -> Algorithm:
  """``algorithm`` with FedNova's ``tau_eff / tau_i`` rescaling before its (averaging) server.

  ``weighting`` must be that of ``algorithm``'s server (FedNova's
  ``p_i`` enter both ``tau_eff`` and the mean).
  """
  server = servers.nova(algorithm.server, weighting=weighting)
  return algorithm._replace(name=name, server=server)


@register('fedprox')
def fedprox(client_lr: float = 0.01, mu: float = 0.01, weighting: str = 'examples') -> Algorithm:
  """FedProx = FedAvg's server + the proximal client: eta_l = client_lr, mu.

  Li et al. weight by ``p_k = n_k / n`` like FedAvg (``weighting='examples'``, default).
  """
  check_client_lr(client_lr)
  base = baselines.fedavg(client_lr, weighting)
  return with_prox(base, 'fedprox', client_lr, mu)


@register('fedbuff_prox')
def fedbuff_prox(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  mu: float = 0.01,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedBuff with the proximal client: eta_l = client_lr, eta_g = server_lr, mu."""
  check_client_lr(client_lr)
  check_server_lr(server_lr)
  base = baselines.fedbuff(client_lr, server_lr, weighting)
  return with_prox(base, 'fedbuff_prox', client_lr, mu)


@register('fednova')
def fednova(client_lr: float = 0.01, weighting: str = 'examples') -> Algorithm:
  """FedNova = FedAvg with normalized averaging: ``x <- x - tau_eff * sum_i p_i Delta_i/tau_i``.

  Wang et al. take ``p_i = n_i / n`` (``weighting='examples'``, default).
  """
  check_client_lr(client_lr)
  base = baselines.fedavg(client_lr, weighting)
  return with_nova(base, 'fednova', weighting)


@register('fedbuff_nova')
def fedbuff_nova(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedBuff with normalized averaging: ``x <- x - eta_g tau_eff mean(Delta_i/tau_i)``."""
  check_client_lr(client_lr)
  check_server_lr(server_lr)
  base = baselines.fedbuff(client_lr, server_lr, weighting)
  return with_nova(base, 'fedbuff_nova', weighting)
