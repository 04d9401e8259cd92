"""The driver: R >= 1 runs of one algorithm in one compiled program.

:class:`ReplicaSimulator` runs R runs (seeds, schedules, data partitions, numeric
hyperparameters) stacked on a leading *replica* axis: it ``jax.vmap``s the engine's
per-run functions (:func:`afl_jax.core.engine.make_program`) over that axis. A single
run is the same driver with R = 1: :class:`Simulator` holds one and runs the per-run
functions without the replica axis, so its state, checkpoints and compiled program
are those of one run (no vmap), while its plan (slots, blocks, ring buffer, memory,
placement) is the driver's.

Host-side plan per replica, padded to common shapes: step inputs ``[R, C, M]``
(arrival slots padded to the widest schedule, masked), ring slots planned per
replica and the buffer sized to the largest plan, local scans to the largest K
(or, with ``local_step_buckets``, each replica's arrivals sorted by K into blocks),
steps past a replica's own schedule inactive (its state stays put). Results do not
depend on the padding: replica r equals the same run alone (tests/sweep_test.py).

Devices: with at least as many replicas as devices, replicas are sharded over the
mesh (``shard_map``: each device runs its replicas with no collective at all; R is
padded to a multiple of the device count with copies whose results are dropped);
with fewer (a single run included), every replica's clients are sharded over the
mesh: the arriving clients of a step and all per-client state are split over the
mesh axis 'clients' (per-client state when N divides evenly, replicated otherwise),
the ring buffer, server state and shared data are replicated, and the server's
aggregation over the arrival axis becomes a cross-device reduction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from afl_jax.core import engine, memory, precision, ring
from afl_jax.core.engine import SimState, StepInputs, to_host
from afl_jax.core.problem import Problem
from afl_jax.core.replicas import shared_problem_axes
from afl_jax.core.types import Algorithm, prepared
from afl_jax.schedules.schedule import Schedule, ScheduleError, clients_mismatch

AXIS = engine.CLIENT_AXIS  # the one mesh axis: replicas or clients are sharded over it


def check_runs(algorithms: Sequence[Algorithm], problem: Problem, schedules: Sequence[Schedule]):
  """The R runs can share one program: known regimes, one structure, schedules for the
  problem's clients (ValueError / ScheduleError, one line; checked before anything else)."""
  r = len(schedules)
  if len(algorithms) != r:
    raise ValueError(f'{len(algorithms)} algorithms for {r} schedules.')
  first = algorithms[0]
  for i, alg in enumerate(algorithms):
    if alg.regime not in engine.REGIMES:
      valid = engine.REGIMES
      raise ValueError(f'algorithm {alg.name!r} has regime {alg.regime!r}; valid: {valid}.')
    shape = (alg.regime, alg.compressor is None, alg.init is None)
    if shape != (first.regime, first.compressor is None, first.init is None):
      raise ValueError(
        f'replica {i} builds a structurally different algorithm (regime, compressor, '
        'init); run it in a separate sweep group.'
      )
  for i, s in enumerate(schedules):
    if s.num_clients != problem.num_clients:
      where = f'schedule {i}: ' if r > 1 else ''
      raise ScheduleError(where + clients_mismatch(s.num_clients, problem.num_clients))


class ReplicaSimulator:
  """R runs of one algorithm along R schedules in one compiled program.

  Example::

    sim = ReplicaSimulator(build, algorithms, problem, axes, schedules, traced, chunk_size=50)
    state = sim.init(params0, keys)         # params0, keys: leading axis R
    while sim.position(state) < sim.num_steps:
      state, out = sim.run_chunk(state, keys)  # out leaves: [R, chunk, ...]

  Args:
    build: ``build(hparams) -> Algorithm`` from one replica's traced scalars
      (called inside the trace).
    algorithms: the R algorithms built on the host with concrete values (already
      validated and prepared); they fix the structure (regime, compressor...).
    problem: the problem, with leaves stacked on a replica axis where ``axes`` says 0.
    axes: ``in_axes`` of ``problem`` (see :func:`stack_problems`).
    schedules: R schedules (any lengths and widths; padded to common shapes).
    hparams: traced hyperparameters, name -> float[R].
    chunk_size: server steps per compiled scan (default: the longest schedule).
    record_params: also return the global params after every step.
    mesh: a mesh with an axis named 'clients' (default: all devices).
    memory_limit_bytes: refuse runs whose analytic memory exceeds 90% of this.
    local_step_buckets: how a step's clients with different K are trained (the
      result does not depend on it: the skipped steps are masked no-ops; a different
      block width may change float32 products in their last bits, e.g. 2e-6 after 20
      steps of an MLP): 0 (default) pads every client to the largest K of all
      replicas; B >= 1 sorts each replica's arrivals of a step by K into B blocks,
      each looping to its own largest K (per replica: under ``vmap`` the loop runs to
      the largest bound of the replicas and masks the rest); None picks B from all
      replicas' K (:func:`~afl_jax.core.engine.choose_step_blocks`: the fewest blocks
      with >= 90% useful steps), keeping the padded path where that saves nothing
      and on accelerators (:func:`~afl_jax.core.engine.plan_slots`). With
      ``client_block_size``, the blocks are those and None/0 switch the grouping
      on/off. ``self.step_work`` is ``(useful, computed)`` local slot-steps.
    compute_dtype: run the clients' loss and gradients in this dtype (e.g.
      ``jnp.bfloat16``) with float32 params, client and server state
      (:func:`afl_jax.core.precision.with_compute_dtype`); None: the params' dtype.
    client_block_size: train the arrival slots of a step in blocks of this many
      clients, one block after another (default: all at once). Bounds the
      temporaries of very large steps (e.g. an always-on step of 100,000 clients);
      the result does not depend on it.
    compress_reports_only: always-on regime with a compressor: compress only the
      messages of the clients that report (default; ``self.report_slots`` rows per
      step, :func:`~afl_jax.core.engine.report_width`); False compresses every
      client's message and keeps the reporters' (the same result, N rows of work:
      for equality checks).
    ring_plans: the ring buffer's slot plan of each schedule (per-job regime; default
      :func:`afl_jax.core.ring.plan` of each; a single run passes the plan that keeps
      the jobs running past its end, so that it can be extended).
  """

  def __init__(
    self,
    build: Callable[[Any], Algorithm],
    algorithms: Sequence[Algorithm],
    problem: Problem,
    axes: Problem,
    schedules: Sequence[Schedule],
    hparams: dict[str, np.ndarray],
    *,
    chunk_size: int | None = None,
    record_params: bool = False,
    mesh: Mesh | None = None,
    memory_limit_bytes: int | None = None,
    local_step_buckets: int | None = 0,
    compute_dtype: Any = None,
    client_block_size: int | None = None,
    compress_reports_only: bool = True,
    ring_plans: Sequence[ring.RingPlan] | None = None,
  ):
    if compute_dtype is not None:
      low = lambda alg: alg._replace(client=precision.with_compute_dtype(alg.client, compute_dtype))
      build = (lambda b: lambda h: low(b(h)))(build)
      algorithms = [low(a) for a in algorithms]
    self.num_replicas = r = len(schedules)
    check_runs(algorithms, problem, schedules)
    first = algorithms[0]
    self.regime = first.regime
    self.algorithms = list(algorithms)
    self.schedules = list(schedules)
    self.num_steps = max(s.num_steps for s in schedules)
    self.replica_steps = np.array([s.num_steps for s in schedules])
    self.chunk_size = int(chunk_size or self.num_steps)
    if self.chunk_size < 1:
      raise ValueError(f'chunk_size must be >= 1; got {chunk_size}.')
    self.record_params = record_params
    per_job = self.regime == 'per_job'
    if ring_plans is None or not per_job:
      ring_plans = [ring.plan(s) if per_job else None for s in schedules]
    self.ring_plans = list(ring_plans)
    self.ring_size = max(p.size for p in self.ring_plans) if per_job else 1
    self.max_steps = max(s.max_local_steps for s in schedules)
    self.client_steps = np.stack([engine.per_client_steps(s) for s in schedules])
    self.mesh = engine.default_mesh() if mesh is None else mesh
    if AXIS not in self.mesh.axis_names:
      raise ValueError(f'mesh needs an axis named {AXIS!r}; got {self.mesh.axis_names}.')
    d = self.num_devices = int(self.mesh.shape[AXIS])
    self.mode = 'replicas' if r >= d and d > 1 else 'clients'
    width = max(s.max_arrivals for s in schedules) if per_job else problem.num_clients
    unit = d if self.mode == 'clients' else 1
    self.num_slots, self.block_size, self.adaptive_steps = engine.plan_slots(
      self.schedules,
      self.regime,
      width,
      unit,
      local_step_buckets,
      client_block_size,
      platform=engine.mesh_platform(self.mesh),
    )
    self.step_work = engine.local_step_work(
      self.schedules,
      self.regime,
      self.num_slots,
      self.num_slots // self.block_size,
      self.adaptive_steps,
    )
    # Replica mode pads R to a multiple of the devices with copies of the last replica.
    self.padded = -(-r // d) * d if self.mode == 'replicas' else r
    self._take = np.minimum(np.arange(self.padded), r - 1)
    self.shard_clients = self.mode == 'clients' and problem.num_clients % d == 0
    self.axes = axes
    self.hparams = {k: np.asarray(v)[self._take] for k, v in hparams.items()}
    self.memory_limit_bytes = memory_limit_bytes
    self.memory: dict[str, int] = {}
    constrain = engine._identity
    if self.mode == 'clients' and d > 1:
      by_slot = NamedSharding(self.mesh, P(AXIS))
      constrain = lambda t: jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, by_slot), t)
    # Equal lengths: one 'active' flag for all replicas keeps the skip of padded steps a
    # real cond; unequal lengths need a per-replica flag, hence a select.
    self.same_length = len(set(self.replica_steps.tolist())) == 1
    # Always-on with a compressor: compress the reporting clients only (as a single run).
    self.report_slots = (
      engine.report_width(schedules, unit, self.num_slots)
      if not per_job and first.compressor is not None and compress_reports_only
      else None
    )
    self.program = engine.make_program(
      build,
      ring_size=self.ring_size,
      max_steps=self.max_steps,
      num_slots=self.num_slots,
      block_size=self.block_size,
      record_params=record_params,
      constrain=constrain,
      inactive='cond' if self.same_length else 'select',
      adaptive_steps=self.adaptive_steps,
      report_slots=self.report_slots,
    )
    self.problem = self._place_problem(problem)
    self._init_fn = self._batched(self.program.init, (0, 0, axes, 0, 0))
    self._chunk_impl = self.program.chunk  # one replica's chunk; runner() batches it
    self._params_fn = jax.jit(self._batched(self.program.params, (0, 0)))
    self._run = None
    self._state_shardings = None
    self._hparams_placed = None

  # ---- placement -----------------------------------------------------------------
  def _spec(self, ndim: int, replica_axis: bool, client_axis: int | None = None) -> P:
    """Where a leaf lives: replica axis 0 sharded (replica mode), or a client axis."""
    if self.mode == 'replicas':
      return P(AXIS) if replica_axis else P()
    if client_axis is not None and self.num_devices > 1 and ndim > client_axis:
      return P(*([None] * client_axis), AXIS)
    return P()

  def _put(self, x: Any, spec: P) -> jax.Array:
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, NamedSharding(self.mesh, spec), lambda i: x[i])

  def _pad(self, x: Any) -> Any:
    return np.asarray(x)[self._take]

  def _place_problem(self, problem: Problem) -> Problem:
    def views(x, ax):
      if ax == 0:
        x = self._pad(x)
      client_axis = (1 if ax == 0 else 0) if self.shard_clients else None
      return self._put(x, self._spec(np.ndim(x), ax == 0, client_axis))

    def shared(x, ax):
      if ax == 0:
        x = self._pad(x)
      return self._put(x, self._spec(np.ndim(x), ax == 0))

    sizes = problem.client_sizes
    return problem.replace(
      client_views=jax.tree.map(views, problem.client_views, self.axes.client_views),
      shared=jax.tree.map(shared, problem.shared, self.axes.shared),
      client_sizes=None if sizes is None else shared(sizes, self.axes.client_sizes),
    )

  def _batched(self, fn: Callable, in_axes: tuple) -> Callable:
    """``fn`` vmapped over replicas; in replica mode each device runs its own replicas."""
    vfn = jax.vmap(fn, in_axes=in_axes)
    if self.mode != 'replicas':
      return vfn
    spec = lambda ax: jax.tree.map(
      lambda a: P(AXIS) if a == 0 else P(), ax, is_leaf=lambda a: a is None
    )
    in_specs = tuple(P(AXIS) if a == 0 else spec(a) for a in in_axes)
    return jax.shard_map(vfn, mesh=self.mesh, in_specs=in_specs, out_specs=P(AXIS), check_vma=False)

  def _state_sharding(self, shape: SimState) -> SimState:
    if self.mode == 'replicas':
      return jax.tree.map(lambda _: NamedSharding(self.mesh, P(AXIS)), shape)
    rep = lambda t: jax.tree.map(lambda _: NamedSharding(self.mesh, P()), t)
    per_client = lambda t: jax.tree.map(
      lambda x: NamedSharding(
        self.mesh, self._spec(x.ndim, True, 1 if self.shard_clients else None)
      ),
      t,
    )
    return SimState(
      rep(shape.step), rep(shape.server), per_client(shape.clients), per_client(shape.compressor),
      rep(shape.ring),
    )  # fmt: skip

  # ---- running -------------------------------------------------------------------
  def _rep(self, x: Any) -> jax.Array:
    """A host array with a leading replica axis, padded and placed."""
    return self._put(self._pad(x), self._spec(np.ndim(x), True))

  def _keys(self, keys: jax.Array) -> jax.Array:
    if jax.random.key_data(keys).shape[0] != self.num_replicas:
      raise ValueError(f'keys must have a leading axis of {self.num_replicas} replicas.')
    return jax.random.wrap_key_data(self._rep(jax.random.key_data(keys)))

  def _traced(self) -> dict[str, jax.Array]:
    if self._hparams_placed is None:
      self._hparams_placed = {k: self._put(v, self._spec(1, True)) for k, v in self.hparams.items()}
    return self._hparams_placed

  def _init_args(self, params: Any, keys: jax.Array) -> tuple:
    params = jax.tree.map(self._rep, params)
    return params, self._keys(keys), self.problem, self._traced(), self._rep(self.client_steps)

  def estimate(self, params: Any, keys: jax.Array) -> dict[str, int]:
    """Analytic memory of the sweep (abstract shapes only, nothing allocated)."""
    args = self._init_args(params, keys)
    shape = jax.eval_shape(self._init_fn, *args)
    one = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), params)
    return memory.estimate(
      shape,
      one,
      self.problem,
      num_slots=self.num_slots,
      block_size=self.block_size,
      num_devices=self.num_devices,
      num_replicas=self.padded,
      problem_axes=self.axes if self.mode == 'replicas' else None,
      replica_axes=self.axes,
    )

  def _plan(self, params: Any, keys: jax.Array) -> tuple:
    """Plans and checks the memory, fixes the state's placement; the init arguments."""
    args = self._init_args(params, keys)
    shape = jax.eval_shape(self._init_fn, *args)
    self.memory = self.estimate(params, keys)
    memory.check(self.memory, self.memory_limit_bytes or memory.available_bytes())
    self._state_shardings = self._state_sharding(shape)
    return args

  def init(self, params: Any, keys: jax.Array) -> SimState:
    """The R states before server step 0. ``params`` and ``keys`` have a leading axis R.

    Raises:
      InsufficientMemoryError: the analytic memory of the R runs does not fit.
    """
    args = self._plan(params, keys)
    return jax.jit(self._init_fn, out_shardings=self._state_shardings)(*args)

  def runner(self) -> Callable:
    """The jitted chunk ``(state, inputs, problem, keys, hparams) -> (state, outputs)``."""
    if self._state_shardings is None:
      raise ValueError('call init() before running.')
    if self._run is None:
      out = NamedSharding(self.mesh, P(AXIS) if self.mode == 'replicas' else P())
      self._run = jax.jit(
        self._batched(self._chunk_impl, (0, self._input_axes(), self.axes, 0, 0)),
        donate_argnums=(0,),
        out_shardings=(self._state_shardings, out),
      )
    return self._run

  def _input_axes(self) -> StepInputs:
    """``in_axes`` of the step inputs: one shared ``active`` flag when lengths are equal."""
    axes = StepInputs(*([0] * len(StepInputs._fields)))
    return axes._replace(active=None) if self.same_length else axes

  def inputs(self, start: int) -> StepInputs:
    """Placed inputs of the chunk starting at ``start``: leaves [R, chunk, ...]."""
    per = [
      engine.step_inputs(s, self.regime, start, self.chunk_size, self.num_slots, p)
      for s, p in zip(self.schedules, self.ring_plans)
    ]
    stacked = [self._pad(np.stack(a)) for a in zip(*per)]
    slot_axis = 2 if self.mode == 'clients' else None
    active = stacked[-1]
    active = (
      self._put(active[0], P()) if self.same_length else self._rep(active[: self.num_replicas])
    )
    return StepInputs(
      *[self._put(a, self._spec(a.ndim, True, slot_axis)) for a in stacked[:-2]],
      self._put(stacked[-2], self._spec(stacked[-2].ndim, True)),
      active,
    )

  def position(self, state: SimState) -> int:
    """The next server step of the replicas still running (host int)."""
    return int(np.max(to_host(state.step)[: self.num_replicas]))

  def run_chunk(self, state: SimState, keys: jax.Array) -> tuple[SimState, dict]:
    """Up to ``chunk_size`` steps of every replica; outputs [R, steps, ...] on the host."""
    start = self.position(state)
    if start >= self.num_steps:
      raise ValueError(f'the longest schedule has {self.num_steps} steps; state is at {start}.')
    valid = min(self.chunk_size, self.num_steps - start)
    inputs = self.inputs(start)
    state, out = self.runner()(state, inputs, self.problem, self._keys(keys), self._traced())
    return state, jax.tree.map(lambda a: to_host(a)[: self.num_replicas, :valid], out)

  def params(self, state: SimState) -> Any:
    """The R global models (leading axis R, on the host)."""
    out = self._params_fn(state, self._traced())
    return jax.tree.map(lambda a: to_host(a)[: self.num_replicas], out)


def _first(t: Any) -> Any:
  return jax.tree.map(lambda x: x[0], t)


def _one(t: Any) -> Any:
  return jax.tree.map(lambda x: x[None], t)


def _drop_replica_axis(sharding: NamedSharding) -> NamedSharding:
  return NamedSharding(sharding.mesh, P(*sharding.spec[1:]))


class Simulator:
  """Runs one algorithm on one problem along one schedule: the driver with R = 1.

  Example::

    sim = Simulator(algorithm, problem, schedule, chunk_size=50)
    state = sim.init(params0, key)
    while sim.position(state) < schedule.num_steps:
      state, outputs = sim.run_chunk(state, key)

  The plan (arrival slots, blocks, ring buffer, memory, placement on the mesh) is
  that of a :class:`ReplicaSimulator` of one replica, ``self.replicas``, whose facts
  (``num_slots``, ``block_size``, ``ring_size``, ``step_work``, ``report_slots``,
  ``num_devices``, ``memory``, ``problem``...) are read through this object. The
  state has no replica axis and the compiled chunk is the per-run function itself
  (no ``vmap``): on one device it is the plain single-device program.

  Args:
    algorithm: the recipe (client rule, server rule, optional compressor, regime).
    problem: loss and client data.
    schedule: arrivals; validated, host-side.
    chunk_size: server steps per compiled scan (default: the whole schedule).
    record_params: also return the global params after every step (verification).
    mesh: a ``jax.sharding.Mesh`` with an axis named 'clients' (default: all devices).
    local_step_buckets: as in :class:`ReplicaSimulator`, but None by default (B
      chosen from the schedule's K).
    client_block_size, compute_dtype, memory_limit_bytes, compress_reports_only: as
      in :class:`ReplicaSimulator`.
  """

  def __init__(
    self,
    algorithm: Algorithm,
    problem: Problem,
    schedule: Schedule,
    *,
    local_step_buckets: int | None = None,
    **options: Any,
  ):
    check_runs([algorithm], problem, [schedule])  # before prepared's own host checks
    algorithm = prepared(algorithm, schedule)  # schedule-sized state
    self.replicas = ReplicaSimulator(
      lambda _: algorithm,
      [algorithm],
      problem,
      shared_problem_axes(problem),
      [schedule],
      {},
      local_step_buckets=local_step_buckets,
      **options,
    )
    self.algorithm = self.replicas.algorithms[0]
    self.schedule = schedule
    self._run = None

  def __getattr__(self, name: str) -> Any:
    if name == 'replicas':  # not built (yet)
      raise AttributeError(name)
    return getattr(self.replicas, name)  # the plan's facts

  def _shardings(self) -> Any:
    return jax.tree.map(_drop_replica_axis, self.replicas._state_shardings)

  def _unbatched(self, inputs: StepInputs) -> StepInputs:
    axes = self.replicas._input_axes()
    return jax.tree.map(
      lambda ax, x: x if ax is None else x[0], axes, inputs, is_leaf=lambda a: a is None
    )

  def init(self, params: Any, key: jax.Array) -> SimState:
    """The state before server step 0 (fresh buffers, placed on the mesh).

    Raises:
      InsufficientMemoryError: the analytic memory of the run (``self.memory``)
        exceeds what the backend reports (or ``memory_limit_bytes``).
    """
    args = self.replicas._plan(_one(params), _one(key))
    init = lambda *a: _first(self.replicas._init_fn(*a))
    return jax.jit(init, out_shardings=self._shardings())(*args)

  def _chunk_impl(self, state: SimState, inputs: StepInputs, problem: Problem, key: jax.Array):
    """One chunk of the run: ``inputs`` as :meth:`inputs` gives them."""
    return self.replicas.program.chunk(state, self._unbatched(inputs), problem, key, {})

  def runner(self) -> Callable:
    """The jitted chunk function ``(state, inputs, problem, key) -> (state, outputs)``."""
    if self.replicas._state_shardings is None:
      raise ValueError('call init() (or restore a state) before running.')
    if self._run is None:
      self._run = jax.jit(
        self._chunk_impl,
        donate_argnums=(0,),
        out_shardings=(self._shardings(), NamedSharding(self.mesh, P())),
      )
    return self._run

  def position(self, state: SimState) -> int:
    """The next server step of ``state`` (host int)."""
    return int(to_host(state.step))

  def run_chunk(self, state: SimState, key: jax.Array) -> tuple[SimState, dict]:
    """Run up to ``chunk_size`` steps from ``state`` (which is donated)."""
    start = self.position(state)
    if start >= self.schedule.num_steps:
      raise ValueError(f'the schedule has {self.schedule.num_steps} steps; state is at {start}.')
    valid = min(self.chunk_size, self.schedule.num_steps - start)
    state, out = self.runner()(state, self.inputs(start), self.problem, key)
    return state, jax.tree.map(lambda a: to_host(a)[:valid], out)

  def params(self, state: SimState) -> Any:
    return self.algorithm.server.params(state.server)


__all__ = ['ReplicaSimulator', 'Simulator', 'check_runs']
