"""Autonomous Multistage FedGM's client (Sun et al., Alg. 4 lines 6-7): the message divided by its
local steps (docs/algorithms/fedgm.md)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.core.types import ClientRule


def divide_by_local_steps(client: ClientRule) -> ClientRule:
  """``client`` sending ``Delta / K_{t,i}``, K the steps it ran."""

  def update(start, state, task, key):
    message, state, metrics = client.update(start, state, task, key)
    k = jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)
    message = jax.tree.map(lambda m: m / k.astype(m.dtype), message)
    return message, state, metrics

  return ClientRule(client.init, update)
