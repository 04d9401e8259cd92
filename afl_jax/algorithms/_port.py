"""Port (Su and Li, IWQoS 2022) as the authors' Plato code writes it: ``x <- x + eta sum_i p_i
(x_i - x_t)`` (docs/algorithms/port.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax import checks
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  SERVERS,
  cosine_rows,
  local_sgd,
  normalized_weights,
  row_counts,
  step_result,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, Params, ServerRule

REFERENCES = ('last_step', 'start')
SIMILARITY_AFTER = 1  # the similarity term is used for tau_i > 1 (the authors' code)


class PortState(NamedTuple):
  params: Params  # x_t
  previous: Params  # the model before the last applied update (x_0 at the start)


@SERVERS.register(
  'port',
  similarity_weight=checks.NON_NEGATIVE,
  staleness_weight=checks.NON_NEGATIVE,
  staleness_bound=checks.POSITIVE,
  reference=checks.choice(REFERENCES),
)
def port_server(
  server_lr: float = 1.0,
  similarity_weight: float = 1.0,
  staleness_weight: float = 3.0,
  staleness_bound: float = 10.0,
  *,
  reference: str = 'last_step',
  weighting: str = 'examples',
) -> ServerRule:
  """The Port server; ``reference`` 'last_step' (the authors') or 'start'."""
  examples = weighting == 'examples'

  def init(params: Params) -> PortState:
    return PortState(params, params)

  def update(state, messages, arrivals, key):
    del key
    x = state.params
    starts = arrivals.start_broadcast
    locals_ = tree.sub(starts, messages)  # x_i = x_{s_i} - Delta_i
    d = jax.tree.map(lambda xi, xt: xi - xt[None], locals_, x)  # d_i = x_i - x_t
    if reference == 'last_step':
      moved = tree.stack_n(tree.sub(x, state.previous), arrivals.mask.shape[0])
    else:
      moved = jax.tree.map(lambda xt, s: xt[None] - s, x, starts)  # x_t - x_{s_i}
    # p_i over the valid arrivals from the cosines rho_i and the staleness tau_i
    staleness = arrivals.staleness
    rho = jnp.where(staleness > SIMILARITY_AFTER, cosine_rows(moved, d, 0.0), 1.0)
    tau = staleness.astype(rho.dtype)
    raw = similarity_weight * (rho + 1) / 2 + staleness_weight * staleness_bound / (
      tau + staleness_bound
    )
    p = normalized_weights(raw * row_counts(arrivals) if examples else raw, arrivals.mask)
    new = PortState(tree.axpy(server_lr, tree.weighted_sum(d, p), x), x)
    return step_result(arrivals, new, state, weight_max=jnp.max(jnp.where(arrivals.mask, p, 0.0)))

  return ServerRule(init, update)


@ALGORITHMS.register('port', uses=(port_server,))
def port(client_lr: float = 0.1, **server: Any) -> Algorithm:
  return Algorithm('port', local_sgd(client_lr), port_server(**server))
