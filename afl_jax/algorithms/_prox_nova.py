"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, MLSys 2020, Alg. 2: the proximal
client) and FedNova (Wang, Liu, Liang, Joshi, Poor, NeurIPS 2020, Sec. 5: ``x <- x - eta_g
tau_eff mean_i(Delta_i / tau_i)``) as compositions on FedAvg and FedBuff: the client or
the server swapped, the rest unchanged. eta_l = ``client_lr``, eta_g = ``server_lr``
(FedBuff's), ``mu`` FedProx's; the FedAvg ones weigh by ``n_k / n`` as the papers do
(docs/algorithms/fedfa.md).
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms._baselines import fedavg, fedbuff
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('fedprox')
def fedprox(client_lr: float = 0.01, mu: float = 0.01, weighting: str = 'examples'):
  """FedProx = FedAvg's server + the proximal client."""
  base = fedavg(client_lr, weighting)
  return base._replace(name='fedprox', client=clients.prox_sgd(client_lr, mu))


@register('fedbuff_prox')
def fedbuff_prox(client_lr=0.01, server_lr=1.0, mu=0.01, weighting='uniform') -> Algorithm:
  """FedBuff with the proximal client."""
  base = fedbuff(client_lr, server_lr, weighting)
  return base._replace(name='fedbuff_prox', client=clients.prox_sgd(client_lr, mu))


@register('fednova')
def fednova(client_lr: float = 0.01, weighting: str = 'examples') -> Algorithm:
  """FedNova = FedAvg with normalized averaging, ``p_i = n_i / n`` by default."""
  base = fedavg(client_lr, weighting)
  return base._replace(name='fednova', server=servers.nova(base.server, weighting=weighting))


@register('fedbuff_nova')
def fedbuff_nova(client_lr=0.01, server_lr=1.0, weighting='uniform') -> Algorithm:
  """FedBuff with normalized averaging: ``x <- x - eta_g tau_eff mean(Delta_i / tau_i)``."""
  base = fedbuff(client_lr, server_lr, weighting)
  return base._replace(name='fedbuff_nova', server=servers.nova(base.server, weighting=weighting))
