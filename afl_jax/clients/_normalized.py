"""Clients whose message is normalized by their number of local steps.

Autonomous Multistage FedGM (Sun, Wu, Huang, Zhang, "On the Role of Server Momentum
in Federated Learning", Alg. 4 lines 6-7, App. B.2): each client runs a time-varying,
device-dependent number K_{t,i} of local steps and sends

.. math::  \\Delta^i_\\mu = \\frac{x^i_{\\mu,0} - x^i_{\\mu,K_{t,i}}}{K_{t,i}}

"to avoid model biased towards clients with more local updates". This is a wrapper
around any client rule (normally ``local_sgd``): the inner rule runs its
``task.num_steps`` steps and its message is divided by the steps it actually ran,
``min(num_steps, max_steps)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.core.types import ClientRule


def divide_by_local_steps(client: ClientRule) -> ClientRule:
  """``client`` whose message is divided by its number of local steps K_{t,i}.

  Args:
    client: any client rule whose message is a pseudo-gradient (e.g. ``local_sgd``).

  Returns:
    A client rule with the same state and metrics; its message is ``Delta / K_{t,i}``.
  """

  def update(start, state, task, key):
    message, state, metrics = client.update(start, state, task, key)
    k = jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)
    message = jax.tree.map(lambda m: m / k.astype(m.dtype), message)
    return message, state, metrics

  return ClientRule(client.init, update)
