"""Analytic memory of a simulation from abstract shapes, checked against the backend before
allocating; docs/reliability.md, "Sizes before allocation"."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.extend
import numpy as np

from afl_jax.errors import UserError

# Working-set multiplier: start model, local model, gradient and message per client.
_COPIES_PER_TRAINED_CLIENT = 4
SAFETY = 0.9  # the usable fraction of the reported memory (check, sweeps' split)
# On CPU the program's buffers and the placed data share the host RAM with the state: peak RSS
# growth / analytic state measured 1.7 (9 runs) and 2.1 (28 runs) on MasFL's Fig. 1 sweeps (MLP,
# N = 100). A CPU sweep fits its groups to the total host memory divided by this factor.
CPU_STATE_FACTOR = 2.5


class InsufficientMemoryError(UserError, MemoryError):
  """A run's analytic state exceeds the memory the backend reports."""


def nbytes(tree: Any) -> int:
  return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree)))


def _intermediate_bytes(jaxpr: Any) -> int:
  """Bytes of every value a traced program produces, sub-programs included."""
  total = 0
  for eqn in jaxpr.eqns:
    subs = [
      getattr(v, 'jaxpr', v)
      for v in eqn.params.values()
      if isinstance(v, jax.extend.core.ClosedJaxpr | jax.extend.core.Jaxpr)
    ]
    if subs:
      total += sum(_intermediate_bytes(j) for j in subs)
      continue
    for v in eqn.outvars:
      aval = getattr(v, 'aval', None)
      if hasattr(aval, 'shape') and hasattr(aval, 'dtype'):
        total += math.prod(aval.shape) * getattr(aval.dtype, 'itemsize', 4)
  return total


def _one_replica(tree: Any, axes: Any, drop: int = 0) -> Any:
  """Abstract leaves without the replica axis (where ``axes`` has 0) and ``drop`` more axes."""
  leaves, treedef = jax.tree.flatten(tree)
  flat = (
    [None] * len(leaves) if axes is None else jax.tree.leaves(axes, is_leaf=lambda a: a is None)
  )
  shape = lambda x, a: jax.ShapeDtypeStruct(np.shape(x)[int(a == 0) + drop :], x.dtype)
  return jax.tree.unflatten(treedef, [shape(x, a) for x, a in zip(leaves, flat)])


def client_step_bytes(problem: Any, params_shape: Any, replica_axes: Any = None) -> int:
  """Bytes one trained client holds in a local step besides its parameters: its batch and every
  intermediate of the traced loss (an upper bound); 0 where that cannot be traced."""
  try:
    view0 = _one_replica(problem.client_views, getattr(replica_axes, 'client_views', None), 1)
    shared = _one_replica(problem.shared, getattr(replica_axes, 'shared', None))
    batch = jax.eval_shape(problem.sample_fn, shared, view0, jax.random.key(0))
    jaxpr = jax.make_jaxpr(problem.loss_fn)(params_shape, batch)
  except Exception:  # noqa: BLE001 (an estimate: a problem it cannot trace is left to the run)
    return 0
  return nbytes(batch) + _intermediate_bytes(jaxpr.jaxpr)


def estimate(state_shape: Any, params_shape: Any, problem: Any, axes: Any, *, num_slots: int,
             block_size: int, num_devices: int, num_replicas: int = 1,
             replicas_sharded: bool = False) -> dict[str, int]:  # fmt: skip
  """Bytes by component and ``'total'``: ``state_shape`` of ``num_replicas`` runs, ``params_shape``
  of ONE run, the placed ``problem`` and its ``axes``."""
  params = nbytes(params_shape)
  shared_axes = jax.tree.leaves(axes.shared, is_leaf=lambda a: a is None)
  shared = sum(
    nbytes(x) * (1 if replicas_sharded and a == 0 else num_devices)
    for x, a in zip(jax.tree.leaves(problem.shared), shared_axes)
  )
  step = num_replicas * block_size
  report = {
    'per_client_state': nbytes((state_shape.clients, state_shape.compressor)),
    'ring_buffer': nbytes(state_shape.ring),
    'server_state': nbytes(state_shape.server),
    'client_data': nbytes(problem.client_views) + shared,
    'stacked_messages': num_replicas * num_slots * params,
    'step_working_set': step * params * _COPIES_PER_TRAINED_CLIENT,
    'batch_activations': step * client_step_bytes(problem, params_shape, axes),
  }
  report['total'] = sum(report.values())
  return report


def replicas_that_fit(one: dict[str, int], two: dict[str, int], limit: int) -> int:
  """The largest R fitting 90% of ``limit``, from the estimates ``one``, ``two`` of 1, 2 runs."""
  per, fixed = two['total'] - one['total'], 2 * one['total'] - two['total']
  if per <= 0:
    raise ValueError('a replica must add memory; got estimates that do not grow with R.')
  return max(int((SAFETY * limit - fixed) // per), 0)


def available_bytes() -> int | None:
  """Device memory on accelerators, free host RAM on CPU."""
  devices = jax.local_devices()
  if devices and devices[0].platform != 'cpu':
    limits = [(d.memory_stats() or {}).get('bytes_limit') for d in devices]
    if all(limits):
      return int(sum(limits))
  return host_bytes('available')


def host_bytes(what: str) -> int | None:
  """psutil's host RAM, ``what`` = 'available' or 'total'; None without psutil."""
  try:
    import psutil
  except ImportError:  # pragma: no cover
    return None
  return int(getattr(psutil.virtual_memory(), what))


def format_bytes(x: float) -> str:
  return f'{x / 2**30:.1f} GiB' if x >= 2**30 else f'{x / 2**20:.1f} MiB'


def format_report(report: dict[str, int]) -> str:
  parts = [f'{k.replace("_", " ")} {v / 2**20:.1f} MiB' for k, v in report.items() if k != 'total']
  return f'memory (analytic): {report["total"] / 2**20:.1f} MiB = ' + ', '.join(parts)


def check(report: dict[str, int], limit: int | None) -> None:
  if limit is not None and report['total'] > SAFETY * limit:
    raise InsufficientMemoryError(
      f'this run needs about {report["total"] / 2**30:.2f} GiB but the backend reports '
      f'{limit / 2**30:.2f} GiB available (90% usable). {format_report(report)}. Reduce '
      'num_clients, the model, the buffer size or set client_block_size to fit.'
    )
