"""Port's server: a buffered weighted average with staleness- and similarity-aware weights.

Su and Li, "How Asynchronous can Federated Learning Be?", IEEE/ACM IWQoS 2022 (Port),
as the authors released it in the Plato framework (TL-System/plato
``examples/port/port_server.py``; the paper's text was not available to us). At step
t each valid arrival's update relative to the current model, ``d_i = x_i - x_t``, is
weighted by ``p_i``, proportional to ``n_i`` times a similarity term (the cosine of
``d_i`` with the global model's recent movement ``u_i``, for ``tau_i > 1``) plus a
staleness term ``B / (tau_i + B)``, and ``x_{t+1} = x_t + eta sum_i p_i d_i``:
(docs/algorithms/port.md, "Equations as implemented"), with ``reference``
(``'last_step'``, the authors' code, or ``'start'``) choosing ``u_i``. Zero cosines,
all-zero weights and empty steps: (docs/algorithms/port.md, "Readings taken").

Port's scheduling part (waiting for, or urgently requesting, clients whose
staleness would exceed ``B``) is the schedule kind ``port``
(:func:`afl_jax.schedules.port_clock.port_clock`): (docs/algorithms/port.md, "The
staleness bound: a scheduling mechanism").
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.core import checks, tree
from afl_jax.core.types import Arrivals, Params, ServerRule
from afl_jax.servers import weighting as weighting_lib
from afl_jax.servers.fedac import cosine_rows, normalized_weights
from afl_jax.servers.pseudo_gradient import step_result

REFERENCES = ('last_step', 'start')
SIMILARITY_AFTER = 1  # the similarity term is used for tau_i > 1 (the authors' code)


class PortState(NamedTuple):
  params: Params  # x_t
  previous: Params  # the model before the last applied update (x_0 at the start)


def port_weights(
  raw_similarity: jax.Array,
  staleness: jax.Array,
  mask: jax.Array,
  similarity_weight: Any,
  staleness_weight: Any,
  staleness_bound: Any,
  sizes: jax.Array | None = None,
) -> jax.Array:
  """p_i over the valid arrivals from the cosines rho_i and the staleness tau_i."""
  rho = jnp.where(staleness > SIMILARITY_AFTER, raw_similarity, 1.0)
  tau = staleness.astype(rho.dtype)
  raw = similarity_weight * (rho + 1) / 2 + staleness_weight * staleness_bound / (
    tau + staleness_bound
  )
  if sizes is not None:
    raw = raw * sizes
  return normalized_weights(raw, mask)


def port_server(
  server_lr: float = 1.0,
  similarity_weight: float = 1.0,
  staleness_weight: float = 3.0,
  staleness_bound: float = 10.0,
  *,
  reference: str = 'last_step',
  weighting: str = 'uniform',
) -> ServerRule:
  """The Port server.

  Args:
    server_lr: eta (> 0); 1 is the authors' weighted model average.
    similarity_weight: lambda_sim (>= 0), weight of the similarity term.
    staleness_weight: lambda_st (>= 0), weight of the staleness term.
    staleness_bound: B (> 0) in the discount B / (tau + B).
    reference: 'last_step' (the authors' code) or 'start' (see the module docstring).
    weighting: 'uniform' (default) or 'examples': the raw weights are multiplied by
      ``n_i``, the example count each message carries (the authors' code,
      :mod:`afl_jax.servers.weighting`).
  """
  checks.positive('server_lr', server_lr)
  checks.non_negative('similarity_weight', similarity_weight)
  checks.non_negative('staleness_weight', staleness_weight)
  checks.positive('staleness_bound', staleness_bound)
  checks.one_of('reference', reference, REFERENCES)
  examples = weighting_lib.check(weighting)

  def init(params: Params) -> PortState:
    return PortState(params, params)

  def update(
    state: PortState, messages: Params, arrivals: Arrivals, key: jax.Array
  ) -> tuple[PortState, dict[str, Any]]:
    del key
    x = state.params
    starts = arrivals.start_broadcast
    locals_ = tree.sub(starts, messages)  # x_i = x_{s_i} - Delta_i
    d = jax.tree.map(lambda xi, xt: xi - xt[None], locals_, x)  # d_i = x_i - x_t
    if reference == 'last_step':
      moved = tree.stack_n(tree.sub(x, state.previous), arrivals.mask.shape[0])
    else:
      moved = jax.tree.map(lambda xt, s: xt[None] - s, x, starts)  # x_t - x_{s_i}
    sim = cosine_rows(moved, d, 0.0)
    sizes = weighting_lib.row_counts(arrivals) if examples else None
    p = port_weights(
      sim,
      arrivals.staleness,
      arrivals.mask,
      similarity_weight,
      staleness_weight,
      staleness_bound,
      sizes,
    )
    new = PortState(tree.axpy(server_lr, tree.weighted_sum(d, p), x), x)
    return step_result(arrivals, new, state, weight_max=jnp.max(jnp.where(arrivals.mask, p, 0.0)))

  return ServerRule(init, update)
