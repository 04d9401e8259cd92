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
SAFETY = _SAFETY  # the usable fraction of the reported memory (check, sweeps' split)
# On CPU the simulation state shares the host RAM with everything else the process holds:
# the compiled program's buffers and temporaries and the placed copies of the data come on
# top of the analytic state. Measured on MasFL's Fig. 1 sweeps (MLP, N = 100, 2 cores):
# peak RSS growth / analytic state = 1.7 for a group of 9 runs, 2.1 for 28 (a 45-run group
# fitted at 1x was killed for memory at 21.8 GB). A sweep that measures the free host
# memory itself fits its groups to that memory divided by this factor.
CPU_STATE_FACTOR = 2.5


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
  num_replicas: int = 1,
  problem_axes: Any = None,
) -> dict[str, int]:
  """Bytes by component (abstract shapes in, no allocation).

  Args:
    state_shape: the run's state (for a sweep: stacked over replicas).
    params_shape: ONE run's params.
    problem: the placed problem (leaves of a sweep may carry a replica axis).
    num_slots: arrival slots per step; block_size: slots trained together.
    num_devices: devices of the mesh; shared data is counted once per device.
    num_replicas: R runs stepping together (a sweep): the step's temporaries scale with R.
    problem_axes: for a sweep whose replicas are sharded over the devices, the
      problem's ``in_axes`` (0 = a per-replica leaf, stored once, not per device).
  """
  params = nbytes(params_shape)
  shared = nbytes(problem.shared) * num_devices
  if problem_axes is not None:
    axes = jax.tree.leaves(problem_axes.shared, is_leaf=lambda a: a is None)
    leaves = jax.tree.leaves(problem.shared)
    shared = sum(nbytes(x) * (1 if a == 0 else num_devices) for x, a in zip(leaves, axes))
  report = {
    'per_client_state': nbytes(state_shape.clients) + nbytes(state_shape.compressor),
    'ring_buffer': nbytes(state_shape.ring),
    'server_state': nbytes(state_shape.server),
    'client_data': nbytes(problem.client_views) + shared,
    'stacked_messages': num_replicas * num_slots * params,
    'step_working_set': num_replicas * block_size * params * _COPIES_PER_TRAINED_CLIENT,
  }
  report['total'] = sum(report.values())
  return report


def replicas_that_fit(one: dict[str, int], two: dict[str, int], limit: int) -> int:
  """The largest R whose analytic total fits in 90% of ``limit`` (R replicas = fixed + R * per).

  ``one`` and ``two`` are :func:`estimate` reports of the same sweep with 1 and 2 replicas.
  """
  per = two['total'] - one['total']
  fixed = one['total'] - per
  if per <= 0:
    raise ValueError('a replica must add memory; got estimates that do not grow with R.')
  return max(int((_SAFETY * limit - fixed) // per), 0)


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


def format_bytes(x: float) -> str:
  """'1.5 GiB' from 1 GiB up, else '12.0 MiB'."""
  return f'{x / 2**30:.1f} GiB' if x >= 2**30 else f'{x / 2**20:.1f} MiB'


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
