"""FedFa's sliding-window server.

Xu, Zhang, Di, Liu, Alharthi, Cao, "FedFa: A Fully Asynchronous Training Paradigm
for Federated Learning", IJCAI 2024: Alg. 1 (FedFa-Server), Sec. 3.1-3.2, eqs. (3)
and (4). The server updates the model at every arrival and keeps a window of the
last K arrivals: a ring ``[K, ...]`` and an arrival counter n, arrival n written into
slot ``n mod K`` (Alg. 1 lines 8-9). An aggregating arrival sets the model to the
mean of the K buffered client models (FedFa-Param, eq. (3)) or steps
``x <- x - eta_g * mean_window(Delta)`` (FedFa-Delta, eq. (4)):
(docs/algorithms/fedfa.md, "Equations as implemented").

Which arrivals aggregate (``aggregate_on_fill``, ``sliding=False`` = FedBuff with
buffer K, Sec. 3.1), the window of exactly K, eq. (4) read literally and M > 1
arrivals per step (processed in slot order, ``lax.scan``): (docs/algorithms/fedfa.md,
"Readings taken") and (docs/algorithms/fedfa.md, "No sliding = FedBuff with buffer K").

``message_scales(num_steps[K], mask[K]) -> float[K]`` optionally rescales the K
windowed messages before aggregating (FedNova's ``tau_eff / tau_i`` over the window,
:func:`afl_jax.servers.fednova.nova_scales`); in param mode the model becomes
``mean(x_start_k) - mean(scale_k * Delta_k)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.core import checks, tree
from afl_jax.core.types import Arrivals, EmptyState, ServerRule
from afl_jax.servers import weighting as weighting_lib

MODES = ('param', 'delta')


class FedFaState(NamedTuple):
  """The global model and the sliding window."""

  params: Any
  models: Any  # [K, ...] buffered client models (param mode), else EmptyState()
  deltas: Any  # [K, ...] buffered messages Delta (delta mode, or param mode with scales)
  num_steps: jax.Array  # int32[K], local steps behind each buffered message
  count: jax.Array  # int32 scalar, valid arrivals received so far (n)
  sizes: Any = EmptyState()  # float[K] examples behind each message ('examples'), else empty


def _ring(params: Any, size: int) -> Any:
  return jax.tree.map(lambda x: jnp.zeros((size,) + jnp.shape(x), jnp.asarray(x).dtype), params)


def _put(ring: Any, index: jax.Array, row: Any) -> Any:
  """Write ``row`` into slot ``index`` (an out-of-range index writes nothing)."""
  return jax.tree.map(lambda r, x: r.at[index].set(x.astype(r.dtype), mode='drop'), ring, row)


def fedfa_server(
  window_size: int = 5,
  mode: str = 'delta',
  server_lr: float = 1.0,
  *,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  message_scales: Callable[..., jax.Array] | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """FedFa's server, Alg. 1 with eq. (3) (``mode='param'``) or eq. (4) (``mode='delta'``).

  Args:
    window_size: K >= 1, the number of arrivals in the sliding window.
    mode: 'param' (eq. 3, the model is the window's mean client model) or 'delta'
      (eq. 4, the model moves by ``eta_g`` times the window's mean delta).
    server_lr: eta_g > 0 of eq. (4); mode 'delta' only (eq. (3) has no step size).
    aggregate_on_fill: also aggregate on the arrival that first fills the window.
    sliding: False = aggregate only after K new arrivals replaced the whole window
      (FedBuff with buffer K); the first full window always aggregates then.
    message_scales: optional ``f(num_steps[K], mask[K]) -> float[K]`` applied to the
      windowed messages at aggregation (FedNova: ``nova_scales``); with
      ``weighting='examples'`` it is called as ``f(num_steps, mask, weights)``.
    weighting: 'uniform' (default: the paper's ``1/K`` over the window) or
      'examples': windowed item k weighted by ``n_k / sum_{window} n_j``, where
      ``n_k`` is the size of the client that sent it (:mod:`afl_jax.servers.weighting`).

  Returns:
    A :class:`~afl_jax.core.types.ServerRule` with state :class:`FedFaState`.

  .. math::  \\text{param: } w_g \\leftarrow \\tfrac1K \\textstyle\\sum_{k \\in S} w_k,
     \\qquad \\text{delta: } w_g \\leftarrow w_g - \\eta_g \\tfrac1K
     \\textstyle\\sum_{k \\in S} \\Delta_k
  """
  if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
    raise ValueError(f'window_size must be an integer >= 1; got {window_size!r}.')
  checks.one_of('mode', mode, MODES)
  checks.positive('server_lr', server_lr)
  if mode == 'param' and server_lr != 1.0:
    raise ValueError(
      f"server_lr applies to mode='delta' only (eq. (3) has no step size); "
      f"got server_lr={server_lr} with mode='param'."
    )
  if message_scales is not None and not callable(message_scales):
    raise ValueError(f'message_scales must be callable or None; got {message_scales!r}.')
  k_size = window_size
  examples = weighting_lib.check(weighting)
  keep_models = mode == 'param'
  keep_deltas = mode == 'delta' or message_scales is not None
  first_aggregation = k_size - 1 if aggregate_on_fill else k_size

  def init(params):
    return FedFaState(
      params=params,
      models=_ring(params, k_size) if keep_models else EmptyState(),
      deltas=_ring(params, k_size) if keep_deltas else EmptyState(),
      num_steps=jnp.zeros((k_size,), jnp.int32),
      count=jnp.zeros((), jnp.int32),
      sizes=EmptyState() if not examples else jnp.zeros((k_size,), jnp.result_type(float)),
    )

  def aggregate(params, models, deltas, num_steps, item_sizes):
    """The model after aggregating a full window (eq. (3) or eq. (4))."""
    full = jnp.ones((k_size,), bool)
    if not examples:
      uniform = jnp.full((k_size,), 1.0 / k_size, jnp.result_type(float))
      scales = None if message_scales is None else message_scales(num_steps, full)
    else:
      uniform = item_sizes / jnp.sum(item_sizes)  # n_k / sum_window n_j
      scales = None if message_scales is None else message_scales(num_steps, full, uniform)
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

  def should_aggregate(n):
    if sliding:
      return n >= first_aggregation
    return (n + 1) % k_size == 0

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
      now = valid & should_aggregate(s.count)
      new_params = aggregate(s.params, models, deltas, num_steps, item_sizes)
      params = tree.where(now, new_params, s.params)
      new = FedFaState(params, models, deltas, num_steps, s.count + valid, item_sizes)
      return new, now

    xs = (
      messages,
      arrivals.start_broadcast,
      arrivals.num_steps,
      weighting_lib.row_counts(arrivals) if examples else arrivals.client_ids,
      arrivals.mask,
    )
    new_state, aggregated = jax.lax.scan(one_arrival, state, xs)
    metrics = {
      'aggregations': jnp.sum(aggregated).astype(jnp.float32),
      'window_fill': jnp.minimum(new_state.count, k_size).astype(jnp.float32),
      'update_norm': tree.global_norm(tree.sub(new_state.params, state.params)),
    }
    return new_state, metrics

  return ServerRule(init, update)
