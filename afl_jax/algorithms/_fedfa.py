"""FedFa (Xu et al., IJCAI 2024): the sliding-window server (Alg. 1, eqs. (3)-(4); ``nova``: Sec.
5.3) with local-SGD or FedProx clients (Alg. 2, Sec. 5.3, Table 6) (docs/algorithms/fedfa.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax import checks
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  SERVERS,
  local_sgd,
  nova_scales,
  prox_sgd,
  row_counts,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, Arrivals, EmptyState, ServerRule

MODES = ('param', 'delta')


class FedFaState(NamedTuple):
  params: Any
  models: Any  # [K, ...] buffered client models (param mode), else EmptyState()
  deltas: Any  # [K, ...] buffered messages Delta (delta mode, or param mode with scales)
  num_steps: jax.Array  # int32[K], local steps behind each buffered message
  count: jax.Array  # int32 scalar, valid arrivals received so far (n)
  sizes: Any = EmptyState()  # float[K] examples behind each message ('examples'), else empty


def _put(ring: Any, index: jax.Array, row: Any) -> Any:  # an out-of-range index writes nothing
  return jax.tree.map(lambda r, x: r.at[index].set(x.astype(r.dtype), mode='drop'), ring, row)


@SERVERS.register(
  'fedfa',
  window_size=checks.integer(1),
  mode=checks.choice(MODES),
  rules=(
    checks.Rule(
      'server_lr',
      lambda mode, server_lr: (
        f"applies to mode='delta' only (eq. (3) has no step size); got mode={mode!r}"
        if mode == 'param' and server_lr != 1.0
        else None
      ),
    ),
  ),
)
def fedfa_server(
  window_size: int = 5,
  mode: str = 'delta',
  server_lr: float = 1.0,
  *,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  nova: bool = False,
  weighting: str = 'uniform',
) -> ServerRule:
  """FedFa's server: ``mode`` 'param' (eq. 3) or 'delta' (eq. 4); ``sliding=False`` aggregates only
  after K new arrivals."""
  k_size = window_size
  examples = weighting == 'examples'
  keep_models = mode == 'param'
  keep_deltas = mode == 'delta' or nova
  first_aggregation = k_size - 1 if aggregate_on_fill else k_size

  def init(params):
    row = lambda x: jnp.zeros((k_size, *jnp.shape(x)), jnp.asarray(x).dtype)
    ring = lambda keep: jax.tree.map(row, params) if keep else EmptyState()
    sizes = jnp.zeros((k_size,), jnp.result_type(float)) if examples else EmptyState()
    counters = jnp.zeros((k_size,), jnp.int32), jnp.zeros((), jnp.int32)
    return FedFaState(params, ring(keep_models), ring(keep_deltas), *counters, sizes)

  def aggregate(params, models, deltas, num_steps, item_sizes):
    full = jnp.ones((k_size,), bool)
    if examples:
      uniform = item_sizes / jnp.sum(item_sizes)  # n_k / sum_window n_j
    else:
      uniform = jnp.full((k_size,), 1.0 / k_size, jnp.result_type(float))
    scales = nova_scales(num_steps, full, uniform if examples else None) if nova else None
    share = (lambda v: v / k_size) if not examples else (lambda v: v * uniform)
    if mode == 'delta':
      weights = uniform if scales is None else share(scales)
      return tree.axpy(-server_lr, tree.weighted_sum(deltas, weights), params)
    mean_model = tree.weighted_sum(models, uniform)
    if scales is None:
      return jax.tree.map(lambda m, p: m.astype(p.dtype), mean_model, params)
    # mean(x_start - s * Delta) = mean(w_k) + mean((1 - s) * Delta).
    correction = tree.weighted_sum(deltas, share(1.0 - scales))
    return jax.tree.map(lambda m, c, p: (m + c).astype(p.dtype), mean_model, correction, params)

  def update(state: FedFaState, messages, arrivals: Arrivals, key):
    del key

    def one_arrival(s: FedFaState, item):
      delta, start, steps, n_i, valid = item
      index = jnp.where(valid, s.count % k_size, k_size)  # k_size: dropped
      models = _put(s.models, index, tree.sub(start, delta)) if keep_models else s.models
      deltas = _put(s.deltas, index, delta) if keep_deltas else s.deltas
      num_steps = s.num_steps.at[index].set(steps.astype(jnp.int32), mode='drop')
      item_sizes = s.sizes
      if examples:
        item_sizes = item_sizes.at[index].set(n_i.astype(item_sizes.dtype), mode='drop')
      n = s.count  # sliding: from the K-th arrival on (K-1-th on fill); else every K-th
      now = valid & (n >= first_aggregation if sliding else (n + 1) % k_size == 0)
      new_params = aggregate(s.params, models, deltas, num_steps, item_sizes)
      params = tree.where(now, new_params, s.params)
      new = FedFaState(params, models, deltas, num_steps, s.count + valid, item_sizes)
      return new, now

    n_i = row_counts(arrivals) if examples else arrivals.client_ids
    xs = (messages, arrivals.start_broadcast, arrivals.num_steps, n_i, arrivals.mask)
    new_state, aggregated = jax.lax.scan(one_arrival, state, xs)
    return new_state, {
      'aggregations': jnp.sum(aggregated).astype(jnp.float32),
      'window_fill': jnp.minimum(new_state.count, k_size).astype(jnp.float32),
      'update_norm': tree.global_norm(tree.sub(new_state.params, state.params)),
    }

  return ServerRule(init, update)


def fedfa(client_lr: float = 0.01, mu: float | None = 0.01, **server: Any) -> Algorithm:
  """FedFa's window on local SGD, or on FedProx's clients where ``mu`` is a number."""
  client = local_sgd(client_lr) if mu is None else prox_sgd(client_lr, mu)
  variant = '_prox' * (mu is not None) + '_nova' * server['nova']
  return Algorithm(f'fedfa_{server["mode"]}{variant}', client, fedfa_server(**server))


def _variant(name: str, mode: str, *, prox: bool = False, nova: bool = False) -> Any:
  """Table 6's variant: the window's ``mode``, FedProx's clients or not, FedNova's or not."""
  fixed = {'mode': mode, 'nova': nova} | ({} if prox else {'mu': None})
  fixed |= {'server_lr': 1.0} if mode == 'param' else {}
  return ALGORITHMS.register(name, fedfa, uses=(fedfa_server,), fixed=fixed)


fedfa_param = _variant('fedfa_param', 'param')
fedfa_delta = _variant('fedfa_delta', 'delta')
fedfa_param_prox = _variant('fedfa_param_prox', 'param', prox=True)
fedfa_delta_prox = _variant('fedfa_delta_prox', 'delta', prox=True)
fedfa_param_nova = _variant('fedfa_param_nova', 'param', nova=True)
fedfa_delta_nova = _variant('fedfa_delta_nova', 'delta', nova=True)
