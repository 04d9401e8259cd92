"""Port (Su and Li, IWQoS 2022), a baseline of FedFa, with the authors' Plato defaults
(docs/algorithms/port.md)."""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('port', uses=(servers.port,))
def port(
  client_lr: float = 0.1,
  server_lr: float = 1.0,
  similarity_weight: float = 1.0,
  staleness_weight: float = 3.0,
  staleness_bound: float = 10.0,
  reference: str = 'last_step',
  weighting: str = 'examples',
) -> Algorithm:
  server = servers.port(
    server_lr,
    similarity_weight,
    staleness_weight,
    staleness_bound,
    reference=reference,
    weighting=weighting,
  )
  return Algorithm('port', clients.local_sgd(client_lr), server)
