"""FedAC: similarity-weighted buffer, prospective adaptive momentum, corrected clients.

Zang, Xue, Ou, Chu, Du, Long, "Efficient Asynchronous Federated Learning with
Prospective Momentum Aggregation and Fine-Grained Correction", AAAI 2024 -- a
baseline of FedEcho (paper 002, Table 2; docs/algorithms/fedecho.md). Server
:mod:`afl_jax.servers.fedac`, client :mod:`afl_jax.clients.fedac`; equations and
readings in docs/algorithms/fedac.md.

Symbols: eta_l -> ``client_lr`` (0.1), eta -> ``server_lr`` (1e-4) -- FedEcho's
Table 8 rates for FedAC; beta_1, beta_2 -> ``beta1``, ``beta2`` (0.6, 0.9),
epsilon (1e-8) and r_min -> ``min_similarity`` (0) follow the AFL-Lib FedAC
these equations were written from (AFL-Lib's floor is 0.1 since July 2025).
``zero_cosine`` (1) and ``first_update`` ('movement') are our readings;
``min_similarity=0.1, zero_cosine=0.0, first_update='model'`` reads as AFL-Lib's
current FedAC does.
"""

from __future__ import annotations

from afl_jax.algorithms.registry import joint_init, register
from afl_jax.clients.fedac import fedac_client
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.fedac import FIRST_UPDATES, fedac_server, init_state


@register(
  'fedac',
  min_similarity=checks.real(-1.0, 1.0),
  history=checks.integer(1),
  correction=checks.boolean(),
  zero_cosine=checks.real(-1.0, 1.0),
  first_update=checks.choice(FIRST_UPDATES),
)
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
  """FedAC; the server's per-client job counts get N from the problem (``Algorithm.init``)."""
  client = fedac_client(client_lr, history=history, correction=correction)
  server = fedac_server(
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
