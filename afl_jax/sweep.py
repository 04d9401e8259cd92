"""Many runs of one algorithm in one compiled program: ``afl_jax.sweep``.

>>> keys = jax.random.split(jax.random.key(0), 3)
>>> res = afl_jax.sweep('fedbuff', problem, schedule, params0, keys,
...                     client_lr=[0.05, 0.1, 0.2], server_lr=1.0)
>>> res.params      # final params of each run, leading axis R = 3
>>> res.metrics     # per-step metrics, each [R, T]

Replica r equals ``afl_jax.simulate(algorithms.get('fedbuff', client_lr=lr[r], ...),
problem_r, schedule_r, params0_r, keys[r])`` (tests/sweep_test.py); see
:mod:`afl_jax.core.replicas` for how the runs are stacked and placed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from afl_jax.algorithms import registry
from afl_jax.core import replicas
from afl_jax.core.engine import SimState
from afl_jax.core.problem import Problem
from afl_jax.core.types import Algorithm, prepared
from afl_jax.schedules.schedule import Schedule


class SweepResult(NamedTuple):
  """Results of R runs; every field has a leading replica axis R.

  Steps past the end of a replica's own (shorter) schedule are zero in ``metrics``
  and ``params_history``; ``num_steps[r]`` says where replica r ends.
  """

  params: Any  # final global params, [R, ...]
  metrics: dict  # per-step metrics, each [R, T] (T = the longest schedule)
  num_steps: np.ndarray  # int[R] each replica's own number of server steps
  params_history: Any  # [R, T, ...] with record_params=True, else None
  final_state: SimState  # leading axis R (padded replicas included on a multi-device mesh)


def _as_list(x: Any, r: int, what: str) -> list:
  if isinstance(x, list | tuple):
    if len(x) != r:
      raise ValueError(f'got {len(x)} {what} for {r} replicas (keys); give one or {r}.')
    return list(x)
  return [x] * r


def build_fn(
  factory: Callable[..., Algorithm], static: dict[str, Any], schedule: Schedule | list
) -> Callable[[dict[str, Any]], Algorithm]:
  """``build(traced) -> Algorithm``: ``factory`` from one replica's scalars, prepared."""

  def build(traced: dict[str, Any]) -> Algorithm:
    return prepared(factory(**static, **traced), schedule)

  return build


def simulator(
  name: str,
  problem: Problem | Sequence[Problem],
  schedules: Schedule | Sequence[Schedule],
  num_replicas: int,
  *,
  run: registry.RunInfo | None = None,
  chunk_size: int | None = None,
  record_params: bool = False,
  mesh: Mesh | None = None,
  memory_limit_bytes: int | None = None,
  factory: Callable[..., Algorithm] | None = None,
  local_step_buckets: int | None = 0,
  compute_dtype: Any = None,
  **hparams: Any,
) -> replicas.ReplicaSimulator:
  """The :class:`~afl_jax.core.replicas.ReplicaSimulator` of a sweep (arguments as :func:`sweep`).

  Validates every replica's hyperparameters on the host (each replica's factory is
  called once with its concrete values; the error names the replica). ``factory``
  (default: ``algorithms.get(name, run=run, **hparams)``) builds the algorithm from
  keyword hyperparameters, e.g. to wrap it in a compressor; it is called inside the
  trace with the traced ones.
  """
  if factory is None:
    factory = functools.partial(registry.get, name, run=run)
  r = num_replicas
  schedule_list = _as_list(schedules, r, 'schedules')
  defaults = registry.hyperparameters(name)
  static, traced = replicas.split_hparams(defaults, hparams, r)
  algorithms = []
  for i in range(r):
    try:
      alg = factory(**static, **replicas.replica_values(traced, i))
      # Prepared against every replica's schedule: one compiled program (and one state
      # shape, e.g. MasFL's history depth) must suit them all.
      algorithms.append(prepared(alg, schedule_list))
    except ValueError as e:
      raise type(e)(f'replica {i}: {e}') from e
  if isinstance(problem, list | tuple):
    if len(problem) != r:
      raise ValueError(f'got {len(problem)} problems for {r} replicas (keys).')
    stacked, axes = replicas.stack_problems(problem)
  else:
    stacked, axes = problem, replicas.shared_problem_axes(problem)
  return replicas.ReplicaSimulator(
    build_fn(factory, static, schedule_list),
    algorithms,
    stacked,
    axes,
    schedule_list,
    traced,
    chunk_size=chunk_size,
    record_params=record_params,
    mesh=mesh,
    memory_limit_bytes=memory_limit_bytes,
    local_step_buckets=local_step_buckets,
    compute_dtype=compute_dtype,
  )


def run_replicas(
  sim: replicas.ReplicaSimulator, params0: Any, keys: jax.Array, *, params_per_replica: bool = False
) -> SweepResult:
  """Run ``sim`` from ``params0`` (shared, or stacked with ``params_per_replica``) to the end."""
  r = sim.num_replicas
  if not params_per_replica:
    params0 = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (r,) + np.shape(x)), params0)
  state = sim.init(params0, keys)
  outs = []
  while sim.position(state) < sim.num_steps:
    state, out = sim.run_chunk(state, keys)
    outs.append(out)
  out = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *outs)
  return SweepResult(
    params=sim.params(state),
    metrics=out['metrics'],
    num_steps=sim.replica_steps,
    params_history=out.get('params'),
    final_state=state,
  )


def sweep(
  name: str,
  problem: Problem | Sequence[Problem],
  schedules: Schedule | Sequence[Schedule],
  params0: Any,
  keys: jax.Array,
  *,
  params_per_replica: bool = False,
  run: registry.RunInfo | None = None,
  chunk_size: int | None = None,
  record_params: bool = False,
  mesh: Mesh | None = None,
  memory_limit_bytes: int | None = None,
  local_step_buckets: int | None = 0,
  compute_dtype: Any = None,
  **hparams: Any,
) -> SweepResult:
  """Run R replicas of algorithm ``name`` in one compiled program.

  Args:
    name: a registered algorithm (``afl_jax.algorithms.names()``).
    problem: one problem shared by all replicas, or R problems (same loss and
      sampler; their client views are stacked, shared leaves stacked where they
      differ, see :func:`afl_jax.core.replicas.stack_problems`).
    schedules: one schedule for all replicas or R of them (any lengths and widths).
    params0: initial params shared by all replicas, or stacked [R, ...] with
      ``params_per_replica=True``.
    keys: [R] PRNG keys, one per replica; R is ``len(keys)``.
    params_per_replica: ``params0`` has a leading replica axis.
    run: run context for factories that take it (``registry.RunInfo``).
    chunk_size: server steps per compiled scan (default: the longest schedule).
    record_params: also return the params after every step (``params_history``).
    mesh: device mesh with an axis 'clients' (default: all devices). Replicas are
      sharded over it when there are at least as many replicas as devices.
    memory_limit_bytes: refuse sweeps whose analytic memory exceeds 90% of this.
    local_step_buckets: clients with different K: 0 (default) pads them to the
      largest K; B >= 1 sorts each replica's arrivals by K into B blocks; None picks
      B (:class:`~afl_jax.core.replicas.ReplicaSimulator`). Results do not depend on it.
    compute_dtype: the clients' loss and gradients in this dtype (e.g.
      ``jnp.bfloat16``), float32 state; None: the params' dtype.
    **hparams: the algorithm's hyperparameters. A float hyperparameter may be a
      sequence of R values (one per replica, traced); anything else is shared and
      structural (part of the compiled program).

  Raises:
    ValueError: a replica's hyperparameters are invalid (checked on the host for
      every replica before any compute; the message names the replica).
  """
  sim = simulator(
    name,
    problem,
    schedules,
    int(jax.random.key_data(keys).shape[0]),
    run=run,
    chunk_size=chunk_size,
    record_params=record_params,
    mesh=mesh,
    memory_limit_bytes=memory_limit_bytes,
    local_step_buckets=local_step_buckets,
    compute_dtype=compute_dtype,
    **hparams,
  )
  return run_replicas(sim, params0, keys, params_per_replica=params_per_replica)
