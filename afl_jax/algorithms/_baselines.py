"""FedAvg (McMahan et al. 2017), FedBuff (Nguyen et al. 2022) and FedAsync (Xie et al. 2019) with
local-SGD clients (docs/algorithms/baselines.md)."""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('fedavg')
def fedavg(client_lr: float = 0.01, weighting: str = 'examples') -> Algorithm:
  return Algorithm('fedavg', clients.local_sgd(client_lr), servers.fedavg(weighting=weighting))


@register('fedbuff')
def fedbuff(client_lr: float = 0.01, server_lr: float = 1.0, weighting: str = 'uniform'):
  server = servers.fedbuff(server_lr, weighting=weighting)
  return Algorithm('fedbuff', clients.local_sgd(client_lr), server)


@register('fedasync', uses=(servers.fedasync,))
def fedasync(
  client_lr: float = 0.01,
  alpha: float = 0.6,
  staleness: str = 'polynomial',
  a: float = 0.5,
  b: float = 4.0,
) -> Algorithm:
  server = servers.fedasync(alpha, staleness, a, b)
  return Algorithm('fedasync', clients.local_sgd(client_lr), server)
