"""CA2FL (Wang et al., ICLR 2024, Alg. 1): ``v_t = mean_i h_i + mean_{S_t} (Delta_i - h_i)``
(docs/algorithms/ca2fl_fadas.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.algorithms._shared import (
  ALGORITHMS,
  SERVERS,
  client_weights,
  joint_init,
  local_sgd,
  row_counts,
  row_weights,
  step_result,
  uniform_weights,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, Params, ServerRule


class CA2FLState(NamedTuple):
  params: Params  # x_t
  cache: Params  # h_i^t, leading axis N (the latest Delta_i of each client; 0 before)
  counts: Any = None  # float[N], n_i of each client that has reported (0 before)

  @property
  def num_clients(self) -> int:
    return jax.tree.leaves(self.cache)[0].shape[0]


def init_state(params: Params, num_clients: int) -> CA2FLState:
  cache = tree.zeros_like(tree.stack_n(params, num_clients))
  return CA2FLState(params, cache, jnp.zeros((num_clients,), jnp.result_type(float)))


@SERVERS.register('ca2fl', context=('num_clients',))
def ca2fl_server(server_lr: float = 1.0, *, num_clients: int = 10, weighting: str = 'uniform'):
  examples = weighting == 'examples'

  def init(params: Params) -> CA2FLState:
    return init_state(params, num_clients)

  def update(state, messages, arrivals, key):
    del key
    mask, ids = arrivals.mask, arrivals.client_ids
    n = state.num_clients
    counts = state.counts
    if examples:
      counts = jnp.zeros((n,), jnp.result_type(float)) if counts is None else counts
      counts = counts.at[jnp.where(mask, ids, n)].set(row_counts(arrivals), mode='drop')
      p = client_weights(counts, row_counts(arrivals, 'total_examples'))
    else:
      p = uniform_weights(n)
    h_mean = tree.weighted_sum(state.cache, p)
    calibration = tree.weighted_sum(
      tree.sub(messages, tree.gather(state.cache, ids)), row_weights(arrivals, examples=examples)
    )
    v = tree.add(h_mean, calibration)
    new = CA2FLState(
      tree.axpy(-server_lr, v, state.params), tree.scatter(state.cache, ids, messages, mask), counts
    )
    return step_result(arrivals, new, state, calibration_norm=tree.global_norm(calibration))

  return ServerRule(init, update)


@ALGORITHMS.register('ca2fl', uses=(ca2fl_server,))
def ca2fl(client_lr: float = 0.01, **server: Any) -> Algorithm:
  client = local_sgd(client_lr)
  init = joint_init(client, lambda params, tasks, _: init_state(params, tasks.client_id.size))
  return Algorithm('ca2fl', client, ca2fl_server(**server), init=init)
