"""CA2FL's server: buffered asynchronous aggregation calibrated by cached updates.

Wang, Cao, Wu, Chen, Chen, "Tackling the Data Heterogeneity in Asynchronous
Federated Learning with Cached Update Calibration", ICLR 2024, Algorithm 1. The
server caches the latest update ``h_i`` of every client (``h_i = 0`` initially) and,
at server step t with the set ``S_t`` of arriving clients, forms the calibrated
update

.. math::
  v_t = \\frac{1}{N} \\sum_{i=1}^{N} h_i^t
        + \\frac{1}{|S_t|} \\sum_{i \\in S_t} (\\Delta_i - h_i^t), \\qquad
  x_{t+1} = x_t - \\eta\\, v_t, \\qquad h_i^{t+1} = \\Delta_i \\ (i \\in S_t).

With ``Delta_i = x_start - x_local`` (the paper's ``x_local - x_start`` negated) the
paper's ``x + eta v`` is our ``x - eta v``; ``eta`` is the paper's global learning rate
(``server_lr``). Readings: (docs/algorithms/ca2fl_fadas.md, "Readings taken").

Consistency checks: with every client arriving every step with zero staleness,
``v_t = mean_i Delta_i`` and CA2FL is FedBuff (tested). A step with no valid arrival
leaves the state unchanged. The cache is an ``[N, ...]`` copy of the model.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.core import checks, tree
from afl_jax.core.types import Arrivals, Params, ServerRule
from afl_jax.servers import weighting as weighting_lib
from afl_jax.servers.pseudo_gradient import step_result


class CA2FLState(NamedTuple):
  params: Params  # x_t
  cache: Params  # h_i^t, leading axis N (the latest Delta_i of each client; 0 before)
  counts: Any = None  # float[N], n_i of each client that has reported (0 before)

  @property
  def num_clients(self) -> int:
    """N, the clients with a cached update (ids in [0, N)); the engine checks it."""
    return jax.tree.leaves(self.cache)[0].shape[0]


def init_state(params: Params, num_clients: int) -> CA2FLState:
  """``h_i^0 = 0`` for every client."""
  num_clients = checks.positive_int('num_clients', num_clients)
  return CA2FLState(
    params,
    tree.zeros_like(tree.stack_n(params, num_clients)),
    jnp.zeros((num_clients,), jnp.result_type(float)),
  )


def ca2fl(
  server_lr: float = 1.0,
  *,
  num_clients: int = 10,
  weighting: str = 'uniform',
) -> ServerRule:
  """The CA2FL server.

  Args:
    server_lr: eta, the global learning rate (> 0).
    num_clients: N, the clients 0..N-1 that ``init(params)`` keeps a cached update
      for (Alg. 1's ``1/N``). The registry's ``'ca2fl'`` sizes the cache from the
      problem's clients (``Algorithm.init``), so this matters only when the rule is
      used on its own; the engine refuses a problem with another number of clients.
    weighting: 'uniform' (default, Alg. 1's ``1/N`` and ``1/|S_t|``) or 'examples':
      ``sum_i p_i h_i`` with ``p_i = n_i / sum_j n_j`` and the calibration weighted
      by ``n_i / sum_{S_t} n_j``, from the example counts the messages carry
      (:mod:`afl_jax.servers.weighting`; ``n_i`` is kept in the state when client i
      first reports, and until then ``h_i = 0``, so its weight does not matter).
  """
  examples = weighting_lib.check(weighting)
  checks.positive('server_lr (eta)', server_lr)
  checks.positive_int('num_clients', num_clients)

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
