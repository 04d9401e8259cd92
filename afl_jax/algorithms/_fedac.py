"""FedAC (Zang et al., AAAI 2024), a baseline of FedEcho, with FedEcho's Table 8 rates
(docs/algorithms/fedac.md)."""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import joint_init, register
from afl_jax.core.types import Algorithm
from afl_jax.servers._fedac import init_state


@register('fedac', uses=(servers.fedac, clients.fedac))
def fedac(
  client_lr: float = 0.1,
  server_lr: float = 1e-4,
  beta1: float = 0.6,
  beta2: float = 0.9,
  epsilon: float = 1e-8,
  min_similarity: float = 0.0,
  history: int = 2,
  correction: bool = True,
  zero_cosine: float = 1.0,
  first_update: str = 'movement',
) -> Algorithm:
  client = clients.fedac(client_lr, history=history, correction=correction)
  server = servers.fedac(
    server_lr,
    beta1,
    beta2,
    epsilon,
    min_similarity,
    zero_cosine=zero_cosine,
    first_update=first_update,
  )
  init = joint_init(
    client, lambda params, tasks, _: init_state(params, tasks.client_id.size, beta1, beta2, epsilon)
  )
  return Algorithm('fedac', client, server, init=init)
