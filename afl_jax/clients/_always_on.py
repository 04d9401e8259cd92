"""Always-on local SGD: the client of AsynFL / AsynFLC / AsynFLC-EF.

Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated Learning with
Gradient Compression for Non-Convex Optimization", Sec. III-A, eqs. (2)-(4) and
Algorithm 1 lines 2-17: every client trains K local SGD steps in every server round
on its own local model (eq. 2); a reporting client sends its update relative to its
*anchor*, the global model it last synchronized to (eq. 3, line 10), and restarts from
``x_{t+1}`` (eq. 4, line 14); the others keep their local model (eq. 4, line 16). The
message is ``Delta = anchor - x^{(i)}_{t,K}``, the negative of eq. (3).

Under ``Algorithm(regime='always_on')`` the client sees the current ``x_t`` and
``task.active``; a reporting client records ``synced = True`` and anchors to the next
broadcast, ``x_{t+1}`` (:class:`AlwaysOnState`): (docs/algorithms/asynfl.md,
"How it meets the engine"); equations in (docs/algorithms/asynfl.md, "Equations as
implemented").
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.clients.sgd import ScalarOrSchedule, learning_rate_at, run_local_steps
from afl_jax.core import checks, tree
from afl_jax.core.types import ClientRule, LocalTask, Params


class AlwaysOnState(NamedTuple):
  """One client's state between server rounds.

  Attributes:
    local: x^{(i)}_t, the local model it continues from (unused while ``synced``).
    anchor: x_{t - tau_t^i}, the global model it last synchronized to (eq. 3).
    synced: bool scalar; True when the client reported at the previous round (or
      before round 0), so it restarts from the broadcast it receives next.
  """

  local: Params
  anchor: Params
  synced: jax.Array  # bool scalar


def always_on_sgd(learning_rate: ScalarOrSchedule) -> ClientRule:
  """K local SGD steps every round on a persistent local model (AsynFL eqs. 2-4).

  Args:
    learning_rate: eta (the paper's local learning rate; our ``client_lr``), a
      float or an optax schedule of the local step index k.

  Returns:
    A :class:`~afl_jax.core.types.ClientRule` for ``regime='always_on'`` whose
    state is :class:`AlwaysOnState`. ``update(x_t, state, task, key)`` returns
    ``Delta = anchor - x_{t,K}`` (meaningful when ``task.active``), the new state
    and ``{'train_loss'}``.
  """
  checks.positive('client_lr', learning_rate)

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
      return tree.axpy(-learning_rate_at(learning_rate, k), g, params), loss  # eq. (2)

    x_k, metrics = run_local_steps(task, key, x0, body)
    message = tree.sub(anchor, x_k)  # = -(eq. 3)
    reported = jnp.asarray(task.active, bool)
    # A reporting client's local model is replaced by x_{t+1} at the next round
    # (Alg. 1 line 14); keep x_{t,K} anyway so the state never holds stale garbage.
    new_state = AlwaysOnState(local=x_k, anchor=anchor, synced=reported)
    return message, new_state, metrics

  return ClientRule(init, update)
