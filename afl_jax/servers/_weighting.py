"""Arrival weights of an averaging server: uniform or by examples, over |S_t| or all clients (AsynFL
eq. 5; FedAvg) (docs/algorithms/baselines.md)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def row_counts(arrivals: Any, field: str = 'num_examples') -> jax.Array:
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
  """float[M] weight of each message (0 on invalid rows)."""
  dtype = jnp.result_type(float)
  mask = arrivals.mask.astype(dtype)
  if not examples:
    denom = jnp.sum(mask) if normalizer == 'arrivals' else jnp.asarray(num_clients, dtype)
    return mask / jnp.maximum(denom, 1.0)
  n = row_counts(arrivals) * mask
  denom = jnp.sum(n) if normalizer == 'arrivals' else row_counts(arrivals, 'total_examples')
  return n / jnp.where(denom > 0, denom, 1.0)


def client_weights(counts: jax.Array, total: Any = None) -> jax.Array:
  """float[N] ``n_i / total`` (default ``sum_j n_j``)."""
  dtype = jnp.result_type(float)
  counts = jnp.asarray(counts, dtype)
  total = jnp.sum(counts) if total is None else jnp.asarray(total, dtype)
  return counts / jnp.where(total > 0, total, 1.0)


def uniform_weights(num_clients: int) -> jax.Array:
  return jnp.full((num_clients,), 1.0 / num_clients, jnp.result_type(float))
