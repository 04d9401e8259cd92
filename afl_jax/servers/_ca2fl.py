"""CA2FL's server (Wang et al., ICLR 2024, Alg. 1): ``v_t = mean_i h_i + mean_{S_t} (Delta_i -
h_i)`` with each client's latest update cached (docs/algorithms/ca2fl_fadas.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.core import checks, tree
from afl_jax.core.types import Arrivals, Params, ServerRule
from afl_jax.servers import _weighting as weighting_lib
from afl_jax.servers._pseudo_gradient import step_result


class CA2FLState(NamedTuple):
  params: Params  # x_t
  cache: Params  # h_i^t, leading axis N (the latest Delta_i of each client; 0 before)
  counts: Any = None  # float[N], n_i of each client that has reported (0 before)

  @property
  def num_clients(self) -> int:
    return jax.tree.leaves(self.cache)[0].shape[0]


def init_state(params: Params, num_clients: int) -> CA2FLState:
  return CA2FLState(
    params,
    tree.zeros_like(tree.stack_n(params, num_clients)),
    jnp.zeros((num_clients,), jnp.result_type(float)),
  )


@checks.validated()
def ca2fl(server_lr: float = 1.0, *, num_clients: int = 10, weighting: str = 'uniform'):
  """The CA2FL server caching clients 0..N-1 (``num_clients``)."""
  examples = weighting == 'examples'

  def init(params: Params) -> CA2FLState:
    return init_state(params, num_clients)

  def update(
    state: CA2FLState, messages: Params, arrivals: Arrivals, key: jax.Array
  ) -> tuple[CA2FLState, dict[str, Any]]:
    del key
    mask, ids = arrivals.mask, arrivals.client_ids
    n = jax.tree.leaves(state.cache)[0].shape[0]
    counts = state.counts
    if examples:
      counts = jnp.zeros((n,), jnp.result_type(float)) if counts is None else counts
      counts = counts.at[jnp.where(mask, ids, n)].set(
        weighting_lib.row_counts(arrivals), mode='drop'
      )
      p = weighting_lib.client_weights(counts, weighting_lib.row_counts(arrivals, 'total_examples'))
    else:
      p = weighting_lib.uniform_weights(n)
    h_mean = tree.weighted_sum(state.cache, p)
    calibration = tree.weighted_sum(
      tree.sub(messages, tree.gather(state.cache, ids)),
      weighting_lib.row_weights(arrivals, examples=examples),
    )
    v = tree.add(h_mean, calibration)
    new = CA2FLState(
      tree.axpy(-server_lr, v, state.params),
      tree.scatter(state.cache, ids, messages, mask),
      counts,
    )
    return step_result(arrivals, new, state, calibration_norm=tree.global_norm(calibration))

  return ServerRule(init, update)
