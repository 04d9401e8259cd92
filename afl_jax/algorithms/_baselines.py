"""FedAvg (McMahan et al., AISTATS 2017, Alg. 1), FedBuff (Nguyen et al., AISTATS 2022,
Alg. 1) and FedAsync (Xie, Koyejo, Gupta 2019, Alg. 1) with local-SGD clients: eta_l =
``client_lr``, eta_g = ``server_lr`` (docs/algorithms/baselines.md).
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('fedavg')
def fedavg(client_lr: float = 0.01, weighting: str = 'examples') -> Algorithm:
  """FedAvg: the server averages the client models by ``n_k / n`` (``'uniform'``: plain)."""
  return Algorithm('fedavg', clients.local_sgd(client_lr), servers.fedavg(weighting=weighting))


@register('fedbuff')
def fedbuff(client_lr: float = 0.01, server_lr: float = 1.0, weighting: str = 'uniform'):
  """FedBuff: ``x <- x - eta_g mean(Delta)`` over the buffer."""
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
  """FedAsync: mixing weight ``alpha``, staleness function ``staleness`` with ``a``, ``b``."""
  server = servers.fedasync(alpha, staleness, a, b)
  return Algorithm('fedasync', clients.local_sgd(client_lr), server)
