"""How an averaging server weights the clients of a step: uniformly or by their data.

FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks from
Decentralized Data", AISTATS 2017, Alg. 1: ``w_{t+1} = sum_k (n_k / n) w^k_{t+1}``)
weights client k by its number of examples ``n_k``; most asynchronous papers average
uniformly. Every averaging server takes ``weighting`` and ``client_sizes``:

* ``'uniform'``: row m of a step has weight ``1/|S_t|`` (``normalizer='arrivals'``)
  or ``1/n`` (``normalizer='clients'``, AsynFL eq. 5);
* ``'examples'``: ``n_i / sum_{j in S_t} n_j`` (``'arrivals'``), or
  ``n_i / sum_{j=1}^{N} n_j`` (``'clients'``: the data-weighted form of eq. 5's
  ``1/n``, so a full step of every client is the data-weighted mean).

Only valid rows (``arrivals.mask``) get weight: padding slots added by the engine
(to a multiple of the device count) and non-reporting clients never enter a count,
a mean or a normalizer. ``client_sizes`` is a host int array ``[N]`` (each >= 1); in
experiments it comes from the run (``RunInfo.client_sizes``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afl_jax.core import checks

WEIGHTINGS = ('uniform', 'examples')


def check(weighting: str, client_sizes: Any, num_clients: int | None = None) -> np.ndarray | None:
  """Validate ``weighting`` / ``client_sizes``; the sizes as float64 ``[N]`` or None (uniform).

  Raises:
    ValueError: unknown weighting; ``'examples'`` without ``client_sizes``; sizes
      that are not a 1-D array of integers >= 1; a length other than ``num_clients``.
  """
  checks.one_of('weighting', weighting, WEIGHTINGS)
  if weighting == 'uniform':
    return None
  if client_sizes is None:
    raise ValueError(
      "weighting='examples' needs client_sizes (an int array [N], examples per client); "
      "got None. Pass the run's client sizes, or weighting='uniform'."
    )
  sizes = np.asarray(client_sizes)
  if sizes.ndim != 1 or sizes.size < 1:
    raise ValueError(f'client_sizes must be a 1-D array [N]; got shape {sizes.shape}.')
  if not np.issubdtype(sizes.dtype, np.number) or np.any(sizes != np.round(sizes)):
    raise ValueError(f'client_sizes must hold integers; got {sizes.dtype} values.')
  if np.any(sizes < 1):
    i = int(np.argmax(sizes < 1))
    raise ValueError(f'client_sizes must all be >= 1; client {i} has {sizes[i]}.')
  if num_clients is not None and sizes.size != num_clients:
    raise ValueError(
      f'client_sizes has {sizes.size} entries but num_clients={num_clients}; give one per client.'
    )
  return sizes.astype(np.float64)


def row_weights(
  arrivals: Any,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  sizes: np.ndarray | None = None,
) -> jax.Array:
  """float[M]: the weight of each stacked message of a step (0 on invalid rows).

  Args:
    arrivals: the step's :class:`~afl_jax.core.types.Arrivals` (mask, client ids).
    normalizer: 'arrivals' (over the valid rows) or 'clients' (over all N clients).
    num_clients: n, for ``normalizer='clients'`` with uniform weights.
    sizes: :func:`check`'s output (None = uniform).
  """
  dtype = jnp.result_type(float)
  mask = arrivals.mask.astype(dtype)
  if sizes is None:
    denom = jnp.sum(mask) if normalizer == 'arrivals' else jnp.asarray(num_clients, dtype)
    return mask / jnp.maximum(denom, 1.0)
  n = jnp.asarray(sizes, dtype)[arrivals.client_ids] * mask
  denom = jnp.sum(n) if normalizer == 'arrivals' else jnp.asarray(sizes.sum(), dtype)
  return n / jnp.where(denom > 0, denom, 1.0)


def client_weights(num_clients: int, sizes: np.ndarray | None = None) -> jax.Array:
  """float[N]: ``p_i`` over all clients, ``1/N`` or ``n_i / sum_j n_j`` (sums to 1)."""
  dtype = jnp.result_type(float)
  if sizes is None:
    return jnp.full((num_clients,), 1.0 / num_clients, dtype)
  return jnp.asarray(sizes / sizes.sum(), dtype)
