"""The replica axis: R runs of one algorithm in one compiled program.

A sweep stacks R runs (seeds, schedules, data partitions, numeric hyperparameters)
on a leading *replica* axis and ``jax.vmap``s the engine's per-run functions
(:func:`afl_jax.core.engine.make_program`, the same code a single run compiles)
over it. Numeric hyperparameters are traced ``[R]`` arrays: the algorithm is built
INSIDE the trace by its registered factory from one replica's scalars, so the
factory's arithmetic is batched like the rest of the step. Everything the factory
decides in Python (window sizes, compressor kinds, K padding, the model) is
structural: it is the same for all replicas of one program, and a grid that varies
it is split into groups, one compile each (:mod:`afl_jax.pipeline.sweep`).

Host-side plan per replica, padded to common shapes: step inputs ``[R, C, M]``
(arrival slots padded to the widest schedule, masked), ring slots planned per
replica and the buffer sized to the largest plan, local scans to the largest K
(or, with ``local_step_buckets``, each replica's arrivals sorted by K into blocks as
a single run does), steps past a replica's own schedule inactive (its state stays
put). Results do not depend on the padding: replica r equals the same run alone
(tests/sweep_test.py).

Devices: with at least as many replicas as devices, replicas are sharded over the
mesh (``shard_map``: each device runs its replicas with no collective at all; R is
padded to a multiple of the device count with copies whose results are dropped);
with fewer, every replica's clients are sharded over the mesh exactly as a single
run does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from afl_jax.core import engine, memory, precision, ring
from afl_jax.core.problem import Problem
from afl_jax.core.types import Algorithm
from afl_jax.schedules.schedule import Schedule, ScheduleError, clients_mismatch

AXIS = engine.CLIENT_AXIS  # the one mesh axis: replicas or clients are sharded over it


# ---- hyperparameters -------------------------------------------------------------
# Float hyperparameters that set a shape (Top-k's k = fraction * d): never traced, one
# value per compiled program.
STRUCTURAL = ('fraction',)


def is_traced(name: str, default: Any, value: Any) -> bool:
  """Is ``value`` of hyperparameter ``name`` one number per replica, traced in one program?

  The one rule for the API (:func:`split_hparams`) and config sweeps: a 1-D array, or a
  list/tuple of numbers where the factory's default is a float (or None and the numbers
  are floats), unless ``name`` sets a shape (:data:`STRUCTURAL`).
  """
  if name in STRUCTURAL:
    return False
  if hasattr(value, 'shape') and not isinstance(value, np.generic):
    return np.ndim(value) == 1
  if not isinstance(value, list | tuple):
    return False
  numbers = all(isinstance(v, int | float | np.number) and not isinstance(v, bool) for v in value)
  float_default = isinstance(default, float)
  optional_float = default is None and all(isinstance(v, float | np.floating) for v in value)
  return numbers and (float_default or optional_float)


def split_hparams(
  defaults: dict[str, Any], hparams: dict[str, Any], num_replicas: int
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
  """``(static, traced)``: traced = hyperparameters given one per replica, as float64[R].

  A value is per replica when :func:`is_traced`; every other value (scalars, strings,
  ints, sequences such as stagewise learning rates, Top-k's fraction) is static: shared
  by all replicas and part of the compiled program.
  """
  static, traced = {}, {}
  for k, v in hparams.items():
    if not is_traced(k, defaults.get(k), v):
      static[k] = v
      continue
    arr = np.asarray(v)
    if arr.shape != (num_replicas,) or arr.dtype == bool:
      raise ValueError(
        f'hyperparameter {k} must be a number or a sequence of {num_replicas} numbers '
        f'(one per replica); got {v!r}.'
      )
    traced[k] = arr.astype(np.float64)
  return static, traced


def replica_values(traced: dict[str, np.ndarray], r: int) -> dict[str, float]:
  """Replica r's concrete values of the traced hyperparameters."""
  return {k: float(v[r]) for k, v in traced.items()}


# ---- problems ----------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
  if a is b:
    return True
  a, b = np.asarray(a), np.asarray(b)
  return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def stack_problems(problems: Sequence[Problem]) -> tuple[Problem, Problem]:
  """One problem for R replicas and its ``in_axes``: ``(stacked, axes)``.

  ``client_views`` are stacked on a new leading replica axis; a leaf of ``shared``
  is stacked only where the replicas' leaves differ (a per-seed permutation of the
  sample index), and stays shared where they are the same array (the samples).
  ``axes`` has the structure of the problem with 0 (stacked) or None per leaf.
  """
  first = problems[0]
  for p in problems[1:]:
    same_static = (p.loss_fn, p.sample_fn, p.num_clients) == (
      first.loss_fn,
      first.sample_fn,
      first.num_clients,
    )
    if not same_static or jax.tree.structure(p) != jax.tree.structure(first):
      raise ValueError('replicas must share loss_fn, sample_fn, num_clients and data structure.')
  stack = lambda *xs: np.stack([np.asarray(x) for x in xs])
  views = jax.tree.map(stack, *[p.client_views for p in problems])
  shared_leaves = [jax.tree.leaves(p.shared) for p in problems]
  out, axes = [], []
  for leaves in zip(*shared_leaves):
    if all(_same(leaves[0], x) for x in leaves[1:]):
      out.append(leaves[0])
      axes.append(None)
    else:
      out.append(stack(*leaves))
      axes.append(0)
  treedef = jax.tree.structure(first.shared)
  sizes = [p.client_sizes for p in problems]
  same_sizes = sizes[0] is None or all(_same(sizes[0], s) for s in sizes[1:])
  stacked = first.replace(
    client_views=views,
    shared=jax.tree.unflatten(treedef, out),
    client_sizes=sizes[0] if same_sizes else stack(*sizes),
  )
  axes_tree = first.replace(
    client_views=jax.tree.map(lambda _: 0, first.client_views),
    shared=jax.tree.unflatten(treedef, axes),
    client_sizes=None if same_sizes else 0,
  )
  return stacked, axes_tree


def shared_problem_axes(problem: Problem) -> Problem:
  """``in_axes`` of a problem that every replica shares."""
  return problem.replace(
    client_views=jax.tree.map(lambda _: None, problem.client_views),
    shared=jax.tree.map(lambda _: None, problem.shared),
    client_sizes=None,
  )


def stack_trees(trees: Sequence[Any]) -> Any:
  """R pytrees -> one pytree with a leading replica axis."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


# ---- the simulator -----------------------------------------------------------------
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
    local_step_buckets: clients with different K, as in
      :class:`~afl_jax.core.engine.Simulator`: 0 (default) pads every client to the
      largest K of all replicas; B >= 1 sorts each replica's arrivals of a step by K
      into B blocks, each looping to its own largest K (per replica: under ``vmap``
      the loop runs to the largest bound of the replicas and masks the rest); None
      picks B from all replicas' K (:func:`~afl_jax.core.engine.choose_step_blocks`),
      keeping the padded path where that saves nothing. The results do not depend on
      it (masked steps are no-ops).
    compute_dtype: the clients' loss and gradients in this dtype (float32 state), as
      in :class:`~afl_jax.core.engine.Simulator`; None: the params' dtype.
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
  ):
    if compute_dtype is not None:
      low = lambda alg: alg._replace(client=precision.with_compute_dtype(alg.client, compute_dtype))
      build = (lambda b: lambda h: low(b(h)))(build)
      algorithms = [low(a) for a in algorithms]
    self.num_replicas = r = len(schedules)
    if len(algorithms) != r:
      raise ValueError(f'{len(algorithms)} algorithms for {r} schedules.')
    first = algorithms[0]
    for i, alg in enumerate(algorithms):
      if alg.regime not in engine.REGIMES:
        raise ValueError(f'algorithm {alg.name!r} has regime {alg.regime!r}.')
      shape = (alg.regime, alg.compressor is None, alg.init is None)
      if shape != (first.regime, first.compressor is None, first.init is None):
        raise ValueError(
          f'replica {i} builds a structurally different algorithm (regime, compressor, '
          'init); run it in a separate sweep group.'
        )
    for i, s in enumerate(schedules):
      if s.num_clients != problem.num_clients:
        raise ScheduleError(
          f'schedule {i}: ' + clients_mismatch(s.num_clients, problem.num_clients)
        )
    self.regime = first.regime
    self.schedules = list(schedules)
    self.num_steps = max(s.num_steps for s in schedules)
    self.replica_steps = np.array([s.num_steps for s in schedules])
    self.chunk_size = int(chunk_size or self.num_steps)
    if self.chunk_size < 1:
      raise ValueError(f'chunk_size must be >= 1; got {chunk_size}.')
    self.record_params = record_params
    per_job = self.regime == 'per_job'
    self.ring_plans = [ring.plan(s) if per_job else None for s in schedules]
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
      if not per_job and first.compressor is not None
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

  def _state_sharding(self, shape: engine.SimState) -> engine.SimState:
    if self.mode == 'replicas':
      return jax.tree.map(lambda _: NamedSharding(self.mesh, P(AXIS)), shape)
    rep = lambda t: jax.tree.map(lambda _: NamedSharding(self.mesh, P()), t)
    per_client = lambda t: jax.tree.map(
      lambda x: NamedSharding(
        self.mesh, self._spec(x.ndim, True, 1 if self.shard_clients else None)
      ),
      t,
    )
    return engine.SimState(
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
    )

  def init(self, params: Any, keys: jax.Array) -> engine.SimState:
    """The R states before server step 0. ``params`` and ``keys`` have a leading axis R.

    Raises:
      InsufficientMemoryError: the analytic memory of the R runs does not fit.
    """
    args = self._init_args(params, keys)
    shape = jax.eval_shape(self._init_fn, *args)
    self.memory = self.estimate(params, keys)
    memory.check(self.memory, self.memory_limit_bytes or memory.available_bytes())
    self._state_shardings = self._state_sharding(shape)
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

  def _input_axes(self) -> engine.StepInputs:
    """``in_axes`` of the step inputs: one shared ``active`` flag when lengths are equal."""
    axes = engine.StepInputs(*([0] * len(engine.StepInputs._fields)))
    return axes._replace(active=None) if self.same_length else axes

  def inputs(self, start: int) -> engine.StepInputs:
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
    return engine.StepInputs(
      *[self._put(a, self._spec(a.ndim, True, slot_axis)) for a in stacked[:-2]],
      self._put(stacked[-2], self._spec(stacked[-2].ndim, True)),
      active,
    )

  def position(self, state: engine.SimState) -> int:
    """The next server step of the replicas still running (host int)."""
    return int(np.max(engine.to_host(state.step)[: self.num_replicas]))

  def run_chunk(self, state: engine.SimState, keys: jax.Array) -> tuple[engine.SimState, dict]:
    """Up to ``chunk_size`` steps of every replica; outputs [R, steps, ...] on the host."""
    start = self.position(state)
    if start >= self.num_steps:
      raise ValueError(f'the longest schedule has {self.num_steps} steps; state is at {start}.')
    valid = min(self.chunk_size, self.num_steps - start)
    inputs = self.inputs(start)
    state, out = self.runner()(state, inputs, self.problem, self._keys(keys), self._traced())
    return state, jax.tree.map(lambda a: engine.to_host(a)[: self.num_replicas, :valid], out)

  def params(self, state: engine.SimState) -> Any:
    """The R global models (leading axis R, on the host)."""
    out = self._params_fn(state, self._traced())
    return jax.tree.map(lambda a: engine.to_host(a)[: self.num_replicas], out)


__all__ = [
  'ReplicaSimulator',
  'replica_values',
  'shared_problem_axes',
  'split_hparams',
  'stack_problems',
  'stack_trees',
]
