"""The MasFL / AdaMasFL client (Yan et al., Alg. 2 and 4): momentum steps corrected by the stale
variate read causally from its history (docs/algorithms/masfl.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from afl_jax.clients._sgd import run_local_steps
from afl_jax.core import checks, tree
from afl_jax.core.messages import MasFLBroadcast, MasFLMessage
from afl_jax.core.types import ClientRule, LocalTask, Params


class MasFLClientState(NamedTuple):
  """The last D sent ``variates`` newest first, and the step each ``arrived`` at (-1 for c_i^0)."""

  variates: Params
  arrived: jax.Array

  @property
  def variate(self) -> Params:
    return tree.gather(self.variates, 0)


def history_depth(schedule: Any) -> int:
  """D, the history a causal ``c~_i`` needs: ``1 + max over jobs of #{i's arrivals in [s, t)}``."""
  if isinstance(schedule, list | tuple):
    return max(history_depth(s) for s in schedule)
  mask = np.asarray(schedule.mask)
  t_idx = np.broadcast_to(np.arange(mask.shape[0])[:, None], mask.shape)[mask]
  ids, starts = np.asarray(schedule.client_ids)[mask], np.asarray(schedule.start_step)[mask]
  if ids.size == 0:
    return 1
  span = np.int64(mask.shape[0] + 1)  # key (client, step) -> client * span + step
  ids = ids.astype(np.int64)
  keys = np.sort(ids * span + t_idx)
  hi = np.searchsorted(keys, ids * span + t_idx)  # i's arrivals before t
  lo = np.searchsorted(keys, ids * span + starts)  # i's arrivals before s
  return 1 + int((hi - lo).max())


def causal_variate(state: MasFLClientState, task: LocalTask) -> Params:
  """c~_i: the newest entry arrived before ``task.start_step`` (else the newest)."""
  if task.start_step is None:
    return state.variate
  before = state.arrived < task.start_step
  index = jnp.where(jnp.any(before), jnp.argmax(before), before.shape[0] - 1)
  return tree.gather(state.variates, index)


def push(state: MasFLClientState, variate: Params, step: Any) -> MasFLClientState:
  if step is None:
    step = state.arrived[0] + 1
  variates = jax.tree.map(
    lambda h, v: jnp.concatenate([v[None].astype(h.dtype), h[:-1]]), state.variates, variate
  )
  arrived = jnp.concatenate([jnp.asarray(step, jnp.int32)[None], state.arrived[:-1]])
  return MasFLClientState(variates, arrived)


def _num_steps(task: LocalTask) -> jax.Array:
  return jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)


def initial_variate(params: Params, task: LocalTask, key: jax.Array) -> Params:
  """c_i^0 (Alg. 1 line 1): the mean of K_i stochastic gradients at ``params``."""

  def body(total, batch, k):
    del k
    loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
    return tree.add(total, g), loss

  total, _ = run_local_steps(task, key, tree.zeros_like(params), body)
  return tree.scale(1.0 / _num_steps(task), total)


def normalized(g: Params) -> Params:
  """``g / ||g||`` with the global l2 norm, and 0 (no step) when ``||g|| = 0``."""
  norm = tree.global_norm(g)
  safe = jnp.where(norm > 0, norm, 1.0)
  return tree.scale(jnp.where(norm > 0, 1.0 / safe, 0.0), g)


@checks.validated(
  beta=checks.real(0.0, 1.0, low_open=True), normalize=checks.boolean(), history=checks.integer(1)
)
def masfl(client_lr: float, beta: float, *, normalize: bool = False, history: int = 1):
  """MasFL's client (Alg. 2), AdaMasFL's (Alg. 4) with ``normalize``: eta = ``client_lr``,
  ``beta``; D = ``history`` (the registry's 'masfl' sizes it for each run). Takes a
  :class:`~afl_jax.core.messages.MasFLBroadcast`, sends a ``MasFLMessage``."""

  def init(params: Params, task: LocalTask, key: jax.Array) -> MasFLClientState:
    c0 = initial_variate(params, task, key)  # Alg. 1/3 line 1
    return MasFLClientState(tree.stack_n(c0, history), jnp.full((history,), -1, jnp.int32))

  def update(
    start: MasFLBroadcast, state: MasFLClientState, task: LocalTask, key: jax.Array
  ) -> tuple[MasFLMessage, MasFLClientState, dict[str, Any]]:
    c_tilde = causal_variate(state, task)

    def body(carry, batch, k):
      del k
      params, grad_sum = carry
      loss, grad = jax.value_and_grad(task.loss_fn)(params, batch)
      # Alg. 2/4 line 3: beta (grad - c~_i + c^{t-tau}) + (1 - beta) g^{t-tau}.
      g = tree.axpy(beta, tree.sub(grad, c_tilde), start.direction)
      step = normalized(g) if normalize else g
      return (tree.axpy(-client_lr, step, params), tree.add(grad_sum, grad)), loss

    carry0 = (start.params, tree.zeros_like(start.params))
    (final, grad_sum), metrics = run_local_steps(task, key, carry0, body)
    k = _num_steps(task)
    variate = tree.scale(1.0 / k, grad_sum)
    delta = None
    if normalize:
      delta = tree.scale(1.0 / (client_lr * k), tree.sub(start.params, final))
    return MasFLMessage(variate, delta), push(state, variate, task.step), metrics

  return ClientRule(init, update)


def adamasfl(client_lr: float, beta: float) -> ClientRule:
  """AdaMasFL's client (Alg. 4): normalized momentum steps, sends Delta and c~."""
  return masfl(client_lr, beta, normalize=True)
