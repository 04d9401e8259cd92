"""FedAC's client as AFL-Lib writes it: SGD corrected by ``c - c_i``, SCAFFOLD's option II variate
(Karimireddy et al. 2020, eq. (4)), ``c_i`` read causally (docs/algorithms/fedac.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.clients._sgd import run_local_steps
from afl_jax.core import checks, tree
from afl_jax.core.messages import FedACBroadcast, FedACMessage
from afl_jax.core.types import ClientRule, LocalTask, Params


class FedACClientState(NamedTuple):
  variates: Params  # [H, ...]: c_i of this client's jobs n-H+1..n (slot (n-1) mod H)
  count: jax.Array  # int32 scalar n: this client's jobs that have arrived


def lookup_variate(state: FedACClientState, applied: jax.Array) -> tuple[Params, jax.Array]:
  """c_i of job number ``applied`` (0 -> zeros); the oldest kept one if evicted."""
  h = jax.tree.leaves(state.variates)[0].shape[0]
  evicted = (applied > 0) & (applied <= state.count - h)
  job = jnp.where(evicted, state.count - h + 1, applied)
  row = tree.gather(state.variates, jnp.mod(job - 1, h))
  return tree.where(job > 0, row, tree.zeros_like(row)), evicted


@checks.validated(history=checks.integer(1), correction=checks.boolean())
def fedac(client_lr: float, *, history: int = 2, correction: bool = True) -> ClientRule:
  """FedAC's client keeping H = ``history`` past variates; ``correction=False`` drops
  ``c - c_i``."""

  def init(params: Params, task: LocalTask, key: jax.Array) -> FedACClientState:
    del task, key
    return FedACClientState(
      tree.zeros_like(tree.stack_n(params, history)), jnp.zeros((), jnp.int32)
    )

  def update(
    start: FedACBroadcast, state: FedACClientState, task: LocalTask, key: jax.Array
  ) -> tuple[FedACMessage, FedACClientState, dict[str, Any]]:
    own, evicted = lookup_variate(state, start.applied[task.client_id])
    corr = tree.sub(start.variate, own) if correction else tree.zeros_like(own)

    def body(carry, batch, k):
      del k
      params, grad_sum = carry
      loss, grad = jax.value_and_grad(task.loss_fn)(params, batch)
      params = tree.axpy(-client_lr, tree.add(grad, corr), params)
      return (params, tree.add(grad_sum, grad)), loss

    carry0 = (start.params, tree.zeros_like(start.params))
    (final, grad_sum), metrics = run_local_steps(task, key, carry0, body)
    k = jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)
    new_variate = tree.scale(1.0 / k, grad_sum)
    slot = jnp.mod(state.count, history)
    variates = jax.tree.map(
      lambda h, v: h.at[slot].set(v.astype(h.dtype)), state.variates, new_variate
    )
    message = FedACMessage(tree.sub(start.params, final), tree.sub(new_variate, own))
    metrics = {**metrics, 'variate_evicted': evicted.astype(jnp.float32)}
    return message, FedACClientState(variates, state.count + 1), metrics

  return ClientRule(init, update)
