"""AsynFL's always-on local SGD (Yang, Hou, Wu, eqs. (2)-(4), Alg. 1 lines 2-17)
(docs/algorithms/asynfl.md, "How it meets the engine")."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.clients._sgd import ScalarOrSchedule, learning_rate_at, run_local_steps
from afl_jax.core import checks, tree
from afl_jax.core.types import ClientRule, LocalTask, Params


class AlwaysOnState(NamedTuple):
  """The local model, the ``anchor`` it last synced to (eq. 3) and ``synced`` (it restarts from the
  next broadcast)."""

  local: Params
  anchor: Params
  synced: jax.Array  # bool scalar


@checks.validated()
def always_on_sgd(client_lr: ScalarOrSchedule) -> ClientRule:
  """AsynFL's client (``regime='always_on'``): sends ``anchor - x_{t,K}``."""

  def init(params: Params, task: LocalTask, key: jax.Array) -> AlwaysOnState:
    del task, key
    # Alg. 1 "Initialize": x_0^{(i)} = x_0; before round 0 every client is in sync.
    return AlwaysOnState(local=params, anchor=params, synced=jnp.ones((), bool))

  def update(
    start: Params, state: AlwaysOnState, task: LocalTask, key: jax.Array
  ) -> tuple[Any, AlwaysOnState, dict[str, jax.Array]]:
    # eq. (4): restart from the global model after a report, else continue locally.
    x0 = tree.where(state.synced, start, state.local)
    anchor = tree.where(state.synced, start, state.anchor)

    def body(params, batch, k):
      loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
      return tree.axpy(-learning_rate_at(client_lr, k), g, params), loss  # eq. (2)

    x_k, metrics = run_local_steps(task, key, x0, body)
    message = tree.sub(anchor, x_k)  # = -(eq. 3)
    reported = jnp.asarray(task.active, bool)
    # A reporting client's local model is replaced by x_{t+1} at the next round
    # (Alg. 1 line 14); keep x_{t,K} anyway so the state never holds stale garbage.
    new_state = AlwaysOnState(local=x_k, anchor=anchor, synced=reported)
    return message, new_state, metrics

  return ClientRule(init, update)
