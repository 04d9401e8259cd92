"""Always-on local SGD: the client of AsynFL / AsynFLC / AsynFLC-EF.

Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated Learning with
Gradient Compression for Non-Convex Optimization", Sec. III-A, eqs. (2)-(4) and
Algorithm 1 lines 2-17. Every client trains K local SGD steps in EVERY server
round on its own local model, whether or not it reports in that round:

.. math::
  x^{(i)}_{t,0} = x^{(i)}_t, \\qquad
  x^{(i)}_{t,k+1} = x^{(i)}_{t,k} - \\eta\\, \\nabla F_i(x^{(i)}_{t,k}; \\xi^{(i)}_{t,k})
  \\quad (2)

A client that reports at round t sends its update relative to the global model it
last synchronized to (its *anchor* ``x_{t - tau_t^i}``, eq. 3 / Alg. 1 line 10)
and then restarts from the new global model ``x_{t+1}`` (eq. 4, Alg. 1 line 14);
a client that does not report keeps its local model ``x^{(i)}_{t+1} = x^{(i)}_{t,K}``
(eq. 4, Alg. 1 line 16).

Sign convention (library-wide): the message is ``Delta = anchor - x^{(i)}_{t,K}``,
the NEGATIVE of the paper's eq. (3) ``Delta_t^{(i)} = x^{(i)}_{t,K} - x_{t-tau}``;
servers then step ``x <- x - eta_g * aggregate``.

How this meets the engine (``Algorithm(regime='always_on')``): at server step t
every client's ``update`` runs with the CURRENT global model ``x_t`` as its start
broadcast and ``task.active`` telling whether it reports at t. The client cannot
see ``x_{t+1}`` (the server has not stepped yet), so a reporting client only
records ``synced = True``; at step t + 1 it then starts from, and anchors to, the
broadcast it is given, which is ``x_{t+1}``.
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
