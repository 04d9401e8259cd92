"""Baselines with local-SGD clients: FedAvg, FedBuff, FedAsync.

* FedAvg — McMahan et al., "Communication-Efficient Learning of Deep Networks from
  Decentralized Data", AISTATS 2017, Alg. 1: synchronous cohorts, new model =
  ``sum_k (n_k / n) w_k``, the client models weighted by their example counts
  (``weighting='examples'``, default; ``'uniform'`` = plain mean). ``client_sizes``
  (int[N]) is run context: experiments fill it from ``RunInfo.client_sizes``.
* FedBuff — Nguyen et al., "Federated Learning with Buffered Asynchronous
  Aggregation", AISTATS 2022, Alg. 1: ``x <- x + eta_g * mean`` of the M buffered
  deltas ``x_local - x_start`` (uniform, default; ``weighting='examples'`` optional).
* FedAsync — Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", 2019:
  ``x <- (1 - a) x + a x_local``, ``a = alpha * s(tau)``.
"""

from __future__ import annotations

from typing import Any

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('fedavg', context=('client_sizes',))
def fedavg(
  client_lr: float = 0.01, weighting: str = 'examples', client_sizes: Any = None
) -> Algorithm:
  """FedAvg: eta_l = client_lr; the server averages the client models by n_k / n.

  ``weighting='examples'`` (default, McMahan et al. Alg. 1) needs ``client_sizes``
  (int[N]); ``'uniform'`` takes the plain mean.
  """
  server = servers.fedavg(weighting=weighting, client_sizes=client_sizes)
  return Algorithm('fedavg', clients.local_sgd(client_lr), server)


@register('fedbuff', context=('client_sizes',))
def fedbuff(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  weighting: str = 'uniform',
  client_sizes: Any = None,
) -> Algorithm:
  """FedBuff: eta_l = client_lr, eta_g = server_lr; ``weighting`` 'uniform' or 'examples'."""
  server = servers.fedbuff(server_lr, weighting=weighting, client_sizes=client_sizes)
  return Algorithm('fedbuff', clients.local_sgd(client_lr), server)


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
