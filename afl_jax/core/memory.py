"""Analytic memory of a simulation, checked against the backend before allocating.

The state of a run is dominated by a few arrays whose sizes are known before any
compute: per-client state (control variates, residuals, local models, logits),
the ring buffer of past broadcasts, the server state, the client data, and the
working set of one step (start models, local models, gradients and messages of the
clients trained together). :func:`estimate` adds them up from abstract shapes;
:func:`check` refuses a run that cannot fit, with the breakdown in the message.
"""

from __future__ import annotations

from typing import Any

import jax

from afl_jax.errors import UserError

# Working-set multiplier: start model, local model, gradient and message per client.
_COPIES_PER_TRAINED_CLIENT = 4
_SAFETY = 0.9


class InsufficientMemoryError(UserError, MemoryError):
  """The analytic state of a run exceeds the memory the backend reports."""


def nbytes(tree: Any) -> int:
  """Bytes of all array leaves (works on ``jax.ShapeDtypeStruct`` trees)."""
  return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree)))


def estimate(
  state_shape: Any,
  params_shape: Any,
  problem: Any,
  *,
  num_slots: int,
  block_size: int,
  num_devices: int,
) -> dict[str, int]:
  """Bytes by component (abstract shapes in, no allocation)."""
  params = nbytes(params_shape)
  report = {
    'per_client_state': nbytes(state_shape.clients) + nbytes(state_shape.compressor),
    'ring_buffer': nbytes(state_shape.ring),
    'server_state': nbytes(state_shape.server),
    'client_data': nbytes(problem.client_views) + nbytes(problem.shared) * num_devices,
    'stacked_messages': num_slots * params,
    'step_working_set': block_size * params * _COPIES_PER_TRAINED_CLIENT,
  }
  report['total'] = sum(report.values())
  return report


def available_bytes() -> int | None:
  """Memory the backend can give: device memory on accelerators, free host RAM on CPU."""
  devices = jax.local_devices()
  if devices and devices[0].platform != 'cpu':
    limits = [(d.memory_stats() or {}).get('bytes_limit') for d in devices]
    if all(limits):
      return int(sum(limits))
  try:
    import psutil

    return int(psutil.virtual_memory().available)
  except ImportError:  # pragma: no cover
    return None


def format_report(report: dict[str, int]) -> str:
  parts = [f'{k.replace("_", " ")} {v / 2**20:.1f} MiB' for k, v in report.items() if k != 'total']
  return f'memory (analytic): {report["total"] / 2**20:.1f} MiB = ' + ', '.join(parts)


def check(report: dict[str, int], limit: int | None) -> None:
  """Raise InsufficientMemoryError when the analytic total exceeds 90% of ``limit``."""
  if limit is None:
    return
  if report['total'] > _SAFETY * limit:
    raise InsufficientMemoryError(
      f'this run needs about {report["total"] / 2**30:.2f} GiB but the backend reports '
      f'{limit / 2**30:.2f} GiB available (90% usable). {format_report(report)}. Reduce '
      'num_clients, the model, the buffer size or set client_block_size to fit.'
    )
