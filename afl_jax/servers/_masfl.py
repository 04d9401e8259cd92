"""The MasFL / AdaMasFL server (Yan et al., Alg. 1 lines 1, 4-8; Alg. 3 lines 1, 4-9); ``selection``
'arrivals' or 'uniform' (docs/algorithms/masfl.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.core import checks, tree
from afl_jax.core.messages import MasFLBroadcast, MasFLMessage
from afl_jax.core.types import Arrivals, Params, ServerRule, unchanged_if_no_arrival
from afl_jax.servers import _weighting as weighting_lib

SELECTIONS = ('arrivals', 'uniform')
SPECS = {'beta': checks.real(0.0, 1.0, low_open=True), 'selection': checks.choice(SELECTIONS)}


class MasFLServerState(NamedTuple):
  params: Params  # theta^t
  variates: Params  # c_i^t, leading axis N
  control: Params  # c^t = mean_i c_i^t
  momentum: Params  # g^t
  pending: MasFLMessage | None  # 'uniform': latest finished message per client [N]; else None
  shares: jax.Array  # float[N], p_i: 1/N, or n_i / sum_j n_j by examples

  @property
  def num_clients(self) -> int:
    return self.shares.shape[0]


def init_state(
  params: Params,
  variates: Params,
  *,
  selection: str = 'arrivals',
  adaptive: bool = False,
  num_examples: Any = None,
) -> MasFLServerState:
  """Alg. 1/3 line 1: ``c^0 = sum_i p_i c_i^0``, ``g^0 = c^0``; ``p_i`` uniform or by
  ``num_examples``."""
  n = jax.tree.leaves(variates)[0].shape[0]
  if num_examples is None:
    shares = weighting_lib.uniform_weights(n)
  else:
    shares = weighting_lib.client_weights(num_examples)
  control = tree.weighted_sum(variates, shares)
  pending = None
  if selection == 'uniform':
    pending = MasFLMessage(variates, tree.zeros_like(variates) if adaptive else None)
  return MasFLServerState(params, variates, control, control, pending, shares)


def uniform_selection(key: jax.Array, num_clients: int, count: jax.Array) -> jax.Array:
  """bool[N]: ``count`` distinct clients drawn uniformly (``count`` may be traced)."""
  rank = jnp.argsort(jnp.argsort(jax.random.uniform(key, (num_clients,))))
  return rank < count


@checks.validated(adaptive=checks.boolean(), **SPECS)
def masfl(
  server_lr: float,
  beta: float,
  *,
  adaptive: bool = False,
  selection: str = 'arrivals',
  num_clients: int = 10,
  weighting: str = 'uniform',
) -> ServerRule:
  """The MasFL server (Alg. 1), AdaMasFL's (Alg. 3) with ``adaptive``; ``init(params)`` starts every
  ``c_i`` at 0 (the paper's ``c_i^0``: :func:`init_state`)."""
  examples = weighting == 'examples'

  def init(params: Params) -> MasFLServerState:
    return init_state(
      params,
      tree.zeros_like(tree.stack_n(params, num_clients)),
      selection=selection,
      adaptive=adaptive,
    )

  def step(
    state: MasFLServerState,
    diff: Params,
    weights: jax.Array,
    variates: Params,
    direction: Params | None,
    p: jax.Array,
  ) -> MasFLServerState:
    """Lines 5-7 given the rows ``diff`` of ``c_i^{t+1} - c_i^t`` and their weights."""
    mean_diff = tree.weighted_sum(diff, weights)
    momentum = jax.tree.map(
      lambda md, c, g: beta * (md + c) + (1 - beta) * g, mean_diff, state.control, state.momentum
    )
    move = momentum if direction is None else direction
    params = tree.axpy(-server_lr, move, state.params)
    control = tree.add(state.control, tree.weighted_sum(diff, p))
    return state._replace(params=params, variates=variates, control=control, momentum=momentum)

  def update(
    state: MasFLServerState, messages: MasFLMessage, arrivals: Arrivals, key: jax.Array
  ) -> tuple[MasFLServerState, dict[str, Any]]:
    mask, ids = arrivals.mask, arrivals.client_ids
    count = jnp.sum(mask)
    n = jax.tree.leaves(state.variates)[0].shape[0]
    p_all = state.shares
    if selection == 'arrivals':
      # O(M) work: only the arriving rows of c_i change.
      diff = tree.sub(messages.variate, tree.gather(state.variates, ids))
      variates = tree.scatter(state.variates, ids, messages.variate, mask)
      weights = weighting_lib.row_weights(arrivals, examples=examples)
      direction = tree.weighted_sum(messages.delta, weights) if adaptive else None
      new = step(state, diff, weights, variates, direction, p_all[ids] * mask)
    else:
      pending = tree.scatter(state.pending, ids, messages, mask)
      chosen = uniform_selection(key, n, count)
      weights = chosen * p_all / jnp.where(count > 0, jnp.sum(chosen * p_all), 1.0)
      rows = lambda x: chosen.reshape((n,) + (1,) * (x.ndim - 1))
      diff = tree.sub(pending.variate, state.variates)
      variates = jax.tree.map(
        lambda new, old: jnp.where(rows(old), new, old), pending.variate, state.variates
      )
      direction = None
      if adaptive:
        direction = tree.weighted_sum(pending.delta, weights)
        pending = pending._replace(
          delta=jax.tree.map(lambda d: jnp.where(rows(d), 0, d), pending.delta)
        )
      new = step(state, diff, weights, variates, direction, chosen * p_all)
      new = new._replace(pending=pending)
    new = unchanged_if_no_arrival(arrivals, new, state)
    metrics = {
      'update_norm': tree.global_norm(tree.sub(state.params, new.params)),
      'momentum_norm': tree.global_norm(new.momentum),
    }
    return new, metrics

  def broadcast(state: MasFLServerState) -> MasFLBroadcast:
    direction = jax.tree.map(lambda c, g: beta * c + (1 - beta) * g, state.control, state.momentum)
    return MasFLBroadcast(state.params, direction)

  return ServerRule(init, update, broadcast)


@checks.validated(**SPECS)
def adamasfl(server_lr: float, beta: float, *, selection: str = 'arrivals', num_clients: int = 10):
  """AdaMasFL's server (Alg. 3): ``theta <- theta - gamma mean(Delta_i)``."""
  return masfl(server_lr, beta, adaptive=True, selection=selection, num_clients=num_clients)
