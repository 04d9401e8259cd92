"""Clients whose message is divided by their number of local steps: Autonomous Multistage
FedGM (Sun, Wu, Huang, Zhang, "On the Role of Server Momentum in Federated Learning",
Alg. 4 lines 6-7) sends ``(x_0 - x_{K_{t,i}}) / K_{t,i}`` (docs/algorithms/fedgm.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.core.types import ClientRule


def divide_by_local_steps(client: ClientRule) -> ClientRule:
  """``client`` (whose message is a pseudo-gradient) sending ``Delta / K_{t,i}``, K the
  steps it ran."""

  def update(start, state, task, key):
    message, state, metrics = client.update(start, state, task, key)
    k = jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)
    message = jax.tree.map(lambda m: m / k.astype(m.dtype), message)
    return message, state, metrics

  return ClientRule(client.init, update)
