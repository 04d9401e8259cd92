"""FedProx (Li et al., MLSys 2020, Alg. 2) and FedNova (Wang et al., NeurIPS 2020, Sec. 5) on FedAvg
and FedBuff (docs/algorithms/fedfa.md)."""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms._baselines import fedavg, fedbuff
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('fedprox')
def fedprox(client_lr: float = 0.01, mu: float = 0.01, weighting: str = 'examples'):
  base = fedavg(client_lr, weighting)
  return base._replace(name='fedprox', client=clients.prox_sgd(client_lr, mu))


@register('fedbuff_prox')
def fedbuff_prox(client_lr=0.01, server_lr=1.0, mu=0.01, weighting='uniform') -> Algorithm:
  base = fedbuff(client_lr, server_lr, weighting)
  return base._replace(name='fedbuff_prox', client=clients.prox_sgd(client_lr, mu))


@register('fednova')
def fednova(client_lr: float = 0.01, weighting: str = 'examples') -> Algorithm:
  base = fedavg(client_lr, weighting)
  return base._replace(name='fednova', server=servers.nova(base.server, weighting=weighting))


@register('fedbuff_nova')
def fedbuff_nova(client_lr=0.01, server_lr=1.0, weighting='uniform') -> Algorithm:
  base = fedbuff(client_lr, server_lr, weighting)
  return base._replace(name='fedbuff_nova', server=servers.nova(base.server, weighting=weighting))
