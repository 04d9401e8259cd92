"""Baselines with local-SGD clients: FedAvg, FedBuff, FedAsync.

* FedAvg — McMahan et al., "Communication-Efficient Learning of Deep Networks from
  Decentralized Data", AISTATS 2017, Alg. 1: synchronous cohorts, new model =
  ``sum_k (n_k / n) w_k``, the client models weighted by their example counts
  (``weighting='examples'``, default; ``'uniform'`` = plain mean); each client's
  example count travels with its message, so no run context is needed.
* FedBuff — Nguyen et al., "Federated Learning with Buffered Asynchronous
  Aggregation", AISTATS 2022, Alg. 1: ``x <- x + eta_g * mean`` of the M buffered
  deltas ``x_local - x_start`` (uniform, default; ``weighting='examples'`` optional).
* FedAsync — Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", 2019:
  ``x <- (1 - a) x + a x_local``, ``a = alpha * s(tau)``.

Readings and symbols: (docs/algorithms/baselines.md, "Baselines: FedAvg, FedBuff,
FedAsync").
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.fedasync import STALENESS_FUNCTIONS


@register('fedavg')
def fedavg(client_lr: float = 0.01, weighting: str = 'examples') -> Algorithm:
  """FedAvg: eta_l = client_lr; the server averages the client models by n_k / n.

  ``weighting='examples'`` (default, McMahan et al. Alg. 1) weights by the example
  counts the messages carry; ``'uniform'`` takes the plain mean.
  """
  server = servers.fedavg(weighting=weighting)
  return Algorithm('fedavg', clients.local_sgd(client_lr), server)


@register('fedbuff')
def fedbuff(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedBuff: eta_l = client_lr, eta_g = server_lr; ``weighting`` 'uniform' or 'examples'."""
  server = servers.fedbuff(server_lr, weighting=weighting)
  return Algorithm('fedbuff', clients.local_sgd(client_lr), server)


@register(
  'fedasync',
  alpha=checks.real(0.0, 1.0, low_open=True),
  staleness=checks.choice(STALENESS_FUNCTIONS),
  a=checks.NON_NEGATIVE,
  b=checks.NON_NEGATIVE,
)
def fedasync(
  client_lr: float = 0.01,
  alpha: float = 0.6,
  staleness: str = 'polynomial',
  a: float = 0.5,
  b: float = 4.0,
) -> Algorithm:
  """FedAsync: eta_l = client_lr, mixing alpha, staleness function s_{a,b}."""
  return Algorithm(
    'fedasync', clients.local_sgd(client_lr), servers.fedasync_server(alpha, staleness, a, b)
  )
