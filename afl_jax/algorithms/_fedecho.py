"""FedEcho (Wang, Ma, Chen, Alg. 1, eqs. (2)-(4)): local-SGD clients and
:func:`afl_jax.servers.fedecho` (docs/algorithms/fedecho.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


@register('fedecho', context=('num_clients', 'apply_fn', 'unlabeled_x'), uses=(servers.fedecho,))
def fedecho(
  client_lr: float = 0.03,
  server_lr: float = 1.0,
  apply_fn: Callable[[Any, jax.Array], jax.Array] | None = None,
  unlabeled_x: jax.Array | None = None,
  distill_steps: int = 10,
  distill_lr: float = 3e-6,
  distill_batch: int | None = None,
  clip_norm: float = 5.0,
  alpha_min: float = 0.2,
  alpha_max: float = 0.8,
  alpha_mode: str = 'dynamic',
  alpha: float = 0.5,
  teacher: str = 'logits',
  optimizer: str = 'adam',
  num_clients: int | None = None,
  reset_distill_state: bool = False,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedEcho with the defaults of Sec. 5.1 and Table 8; needs the run context ``apply_fn``,
  ``unlabeled_x`` and ``num_clients``."""
  context = {'apply_fn': apply_fn, 'unlabeled_x': unlabeled_x, 'num_clients': num_clients}
  missing = [k for k, v in context.items() if v is None]
  if missing:
    raise ValueError(f'fedecho needs the run context {missing} (a RunInfo); got None.')
  server = servers.fedecho(
    **context,
    server_lr=server_lr,
    optimizer=optimizer,
    distill_lr=distill_lr,
    clip_norm=clip_norm,
    distill_steps=distill_steps,
    distill_batch=distill_batch,
    alpha_mode=alpha_mode,
    alpha_min=alpha_min,
    alpha_max=alpha_max,
    alpha=alpha,
    teacher=teacher,
    reset_distill_state=reset_distill_state,
    weighting=weighting,
  )
  return Algorithm('fedecho', clients.local_sgd(client_lr), server)
