"""How an averaging server weights the clients of a step: uniformly or by their data.

FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks from
Decentralized Data", AISTATS 2017, Alg. 1: ``w_{t+1} = sum_k (n_k / n) w^k_{t+1}``)
weights client k by its number of examples ``n_k``; most asynchronous papers average
uniformly. Every averaging server takes ``weighting``:

* ``'uniform'``: row m of a step has weight ``1/|S_t|`` (``normalizer='arrivals'``)
  or ``1/n`` (``normalizer='clients'``, AsynFL eq. 5);
* ``'examples'``: ``n_i / sum_{j in S_t} n_j`` (``'arrivals'``), or
  ``n_i / sum_{j=1}^{N} n_j`` (``'clients'``: the data-weighted form of eq. 5's
  ``1/n``, so a full step of every client is the data-weighted mean).

The counts travel with the messages: ``n_i`` is ``arrivals.num_examples`` of the row
and ``sum_{j=1}^{N} n_j`` is ``arrivals.total_examples``
(:class:`~afl_jax.core.types.Arrivals`, filled by the engine from the problem's
client sizes), so a server needs no run context to weight by data. Only valid rows
(``arrivals.mask``) get weight: padding slots added by the engine (to a multiple of
the device count) and non-reporting clients never enter a count, a mean or a
normalizer.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from afl_jax.core import checks

WEIGHTINGS = ('uniform', 'examples')


def check(weighting: str) -> bool:
  """Validate ``weighting``; True when it is ``'examples'``.

  Raises:
    ValueError: unknown weighting.
  """
  checks.one_of('weighting', weighting, WEIGHTINGS)
  return weighting == 'examples'


def row_counts(arrivals: Any, field: str = 'num_examples') -> jax.Array:
  """float[M]: ``arrivals.num_examples`` (or another count field) in the float dtype."""
  value = getattr(arrivals, field)
  if value is None:
    raise ValueError(
      f"weighting='examples' needs arrivals.{field} (the engine fills it from the "
      "problem's client sizes); build the Arrivals with it, or use weighting='uniform'."
    )
  return jnp.asarray(value, jnp.result_type(float))


def row_weights(
  arrivals: Any,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  examples: bool = False,
) -> jax.Array:
  """float[M]: the weight of each stacked message of a step (0 on invalid rows).

  Args:
    arrivals: the step's :class:`~afl_jax.core.types.Arrivals` (mask, example counts).
    normalizer: 'arrivals' (over the valid rows) or 'clients' (over all N clients).
    num_clients: n, for ``normalizer='clients'`` with uniform weights.
    examples: weight by ``arrivals.num_examples`` (:func:`check`'s output).
  """
  dtype = jnp.result_type(float)
  mask = arrivals.mask.astype(dtype)
  if not examples:
    denom = jnp.sum(mask) if normalizer == 'arrivals' else jnp.asarray(num_clients, dtype)
    return mask / jnp.maximum(denom, 1.0)
  n = row_counts(arrivals) * mask
  denom = jnp.sum(n) if normalizer == 'arrivals' else row_counts(arrivals, 'total_examples')
  return n / jnp.where(denom > 0, denom, 1.0)


def client_weights(counts: jax.Array, total: Any = None) -> jax.Array:
  """float[N]: ``p_i = n_i / sum_j n_j`` over all clients from their counts ``[N]``.

  ``total`` (default ``sum(counts)``) is the population's count where ``counts`` holds
  only the clients seen so far (0 for the others).
  """
  dtype = jnp.result_type(float)
  counts = jnp.asarray(counts, dtype)
  total = jnp.sum(counts) if total is None else jnp.asarray(total, dtype)
  return counts / jnp.where(total > 0, total, 1.0)


def uniform_weights(num_clients: int) -> jax.Array:
  """float[N]: ``1/N`` for every client."""
  return jnp.full((num_clients,), 1.0 / num_clients, jnp.result_type(float))
