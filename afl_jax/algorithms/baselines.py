"""Baselines with local-SGD clients: FedAvg, FedBuff, FedAsync.

* FedAvg — McMahan et al., "Communication-Efficient Learning of Deep Networks from
  Decentralized Data", AISTATS 2017: synchronous cohorts, new model = mean of the
  client models (uniform weights).
* FedBuff — Nguyen et al., "Federated Learning with Buffered Asynchronous
  Aggregation", AISTATS 2022, Alg. 1: ``x <- x + eta_g * mean`` of the M buffered
  deltas ``x_local - x_start``.
* FedAsync — Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", 2019:
  ``x <- (1 - a) x + a x_local``, ``a = alpha * s(tau)``.
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('fedavg')
def fedavg(client_lr: float = 0.01) -> Algorithm:
  """FedAvg: eta_l = client_lr; the server averages the client models."""
  return Algorithm('fedavg', clients.local_sgd(client_lr), servers.fedavg())


@register('fedbuff')
def fedbuff(client_lr: float = 0.01, server_lr: float = 1.0) -> Algorithm:
  """FedBuff: eta_l = client_lr, eta_g = server_lr."""
  return Algorithm('fedbuff', clients.local_sgd(client_lr), servers.fedbuff(server_lr))


@register('fedasync')
def fedasync(
  client_lr: float = 0.01,
  alpha: float = 0.6,
  staleness: str = 'polynomial',
  a: float = 0.5,
  b: float = 4.0,
) -> Algorithm:
  """FedAsync: eta_l = client_lr, mixing alpha, staleness function s_{a,b}."""
  return Algorithm(
    'fedasync', clients.local_sgd(client_lr), servers.fedasync(alpha, staleness, a, b)
  )
