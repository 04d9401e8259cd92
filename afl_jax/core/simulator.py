"""The driver: :class:`Simulator` plans one run or R runs on a replica axis (slots, ring, memory,
placement), compiles the engine once per program and runs it chunk by chunk; docs/sharding.md."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from afl_jax.core import engine, memory, precision
from afl_jax.core.engine import SimState, StepInputs, to_host
from afl_jax.core.problem import Problem
from afl_jax.core.types import Algorithm, prepared
from afl_jax.schedules.schedule import Schedule, ScheduleError

AXIS = engine.CLIENT_AXIS  # the one mesh axis: replicas or clients are sharded over it


class Simulator:
  """Runs an algorithm on a problem along one schedule, or R schedules (a list) at once::

    sim = Simulator(algorithm, problem, schedule, chunk_size=50)
    state = sim.init(params0, key)
    while sim.position(state) < sim.num_steps:
      state, outputs = sim.run_chunk(state, key)

  R runs: ``build(hparams)`` makes one replica's algorithm from its traced scalars (``hparams``:
  name -> float[R]), ``problem_axes`` are the problem's ``in_axes``. ``local_step_buckets`` and
  ``client_block_size``: :func:`afl_jax.core.engine.plan_slots`; ``step_work``: ``(useful,
  computed)`` local slot-steps; ``compute_dtype``: :mod:`afl_jax.core.precision`."""

  def __init__(self, algorithm: Algorithm, problem: Problem,
               schedule: Schedule | Sequence[Schedule], *,
               build: Callable[[Any], Algorithm] | None = None,
               hparams: dict[str, np.ndarray] | None = None, problem_axes: Problem | None = None,
               chunk_size: int | None = None, record_params: bool = False,
               mesh: Mesh | None = None, memory_limit_bytes: int | None = None,
               local_step_buckets: int | None = None, compute_dtype: Any = None,
               client_block_size: int | None = None):  # fmt: skip
    self.batched = not isinstance(schedule, Schedule)
    self.schedules = schedules = list(schedule) if self.batched else [schedule]
    r = self.num_replicas = len(schedules)
    if algorithm.regime not in engine.REGIMES:
      raise ValueError(f'algorithm {algorithm.name!r}: regime must be one of {engine.REGIMES}.')
    n = problem.num_clients
    for i, s in enumerate(schedules):
      if s.num_clients != n:
        raise ScheduleError(
          (f'schedule {i}: ' if self.batched else '') + f'schedule.num_clients={s.num_clients} '
          f'but the problem has {n} clients; build it with from_arrays(..., num_clients={n}).'
        )
    sched_arg = list({id(s): s for s in schedules}.values()) if self.batched else schedule

    def low(a: Algorithm) -> Algorithm:  # schedule-sized state, compute dtype
      a = prepared(a, sched_arg)
      if compute_dtype is None:
        return a
      return a._replace(client=precision.with_compute_dtype(a.client, compute_dtype))

    self.algorithm = low(algorithm)
    alg = self.algorithm  # the closure holds the algorithm, not the placed problem
    self._build = (lambda h: low(build(h))) if build else (lambda _: alg)
    self.regime = regime = algorithm.regime
    self.num_steps = max(s.num_steps for s in schedules)
    self.replica_steps = np.array([s.num_steps for s in schedules])
    self.chunk_size = int(chunk_size or self.num_steps)
    if self.chunk_size < 1:
      raise ValueError(f'chunk_size must be >= 1; got {chunk_size}.')
    per_job = regime == 'per_job'
    self.ring_plans = [engine.plan_ring(s) if per_job else None for s in schedules]
    self.ring_size = max(p.size for p in self.ring_plans) if per_job else 1
    self.mesh = engine.default_mesh() if mesh is None else mesh
    if AXIS not in self.mesh.axis_names:
      raise ValueError(f'mesh needs an axis named {AXIS!r}; got {self.mesh.axis_names}.')
    d = self.num_devices = int(self.mesh.shape[AXIS])
    self.mode = 'replicas' if self.batched and r >= d > 1 else 'clients'
    unit = d if self.mode == 'clients' else 1
    width = max(s.max_arrivals for s in schedules) if per_job else problem.num_clients
    plan = engine.plan_slots(
      schedules, regime, width, unit, local_step_buckets, client_block_size,
      platform=self.mesh.devices.flat[0].platform,
    )  # fmt: skip
    self.num_slots, self.block_size, self.adaptive_steps = plan
    self.step_work = engine.local_step_work(schedules, regime, *plan)
    self.useful_steps = [engine.local_step_work(s, regime, 1, 1, True)[0] for s in schedules]
    self.max_steps = max(s.max_local_steps for s in schedules)
    # rows compressed per step: the most reports of any step, a multiple of unit
    most = max(int(np.max(s.mask.sum(axis=1), initial=0)) for s in schedules)
    self.report_slots = (
      min(engine._up(max(most, 1), unit), self.num_slots) if algorithm.compressor else None
    )
    # replica mode pads R to a multiple of the devices with copies of the last replica
    self.padded = engine._up(r, d) if self.mode == 'replicas' else r
    self._take = np.minimum(np.arange(self.padded), r - 1)
    self.shard_clients = self.mode == 'clients' and problem.num_clients % d == 0
    none = lambda t: jax.tree.map(lambda _: None, t)  # every replica shares the problem
    self.axes = problem_axes or problem.replace(
      client_views=none(problem.client_views), shared=none(problem.shared), client_sizes=None
    )
    self.hparams = {k: self._place(v) for k, v in (hparams or {}).items()}
    self.memory_limit_bytes = memory_limit_bytes
    self.memory: dict[str, int] = {}
    key = None if build else self._program_key(algorithm, sched_arg, compute_dtype, record_params)
    self._compiled = (_COMPILED.pop(key, None) if key else None) or self._compile(record_params)
    if key is not None:  # most recently used last; the least recently used evicted
      _COMPILED[key] = self._compiled
      while len(_COMPILED) > _KEEP:
        _COMPILED.popitem(last=False)
    self.program = self._compiled.program
    self.problem = problem.replace(
      client_views=self._tree(problem.client_views, self.axes.client_views, self.shard_clients),
      shared=self._tree(problem.shared, self.axes.shared),
      client_sizes=self._tree(problem.client_sizes, self.axes.client_sizes),
    )
    self._chunk = self.program.chunk  # one run's chunk; runner() batches and compiles it
    self._run = self._state_shardings = None

  # ---- placement ---------------------------------------------------------------------
  def _place(self, x: Any, per_run: bool = True, client_axis: int | None = None) -> jax.Array:
    """A host array on the mesh; ``per_run``: one value per run (replica axis when batched);
    ``client_axis``: the axis of one run's array sharded over the devices."""
    x = np.asarray(x)
    lead = int(per_run and self.batched)
    if lead:
      x = x[self._take]
    if self.mode == 'replicas':
      spec = P(AXIS) if lead else P()
    elif client_axis is not None and self.num_devices > 1 and x.ndim > client_axis + lead:
      spec = P(*([None] * (client_axis + lead)), AXIS)
    else:
      spec = P()
    return jax.make_array_from_callback(x.shape, NamedSharding(self.mesh, spec), lambda i: x[i])

  def _tree(self, t: Any, axes: Any, by_client: bool = False) -> Any:
    return jax.tree.map(lambda x, ax: self._place(x, ax == 0, 0 if by_client else None), t, axes)

  def _runs(self, stacked: np.ndarray, client_axis: int | None = None) -> jax.Array:
    return self._place(stacked if self.batched else stacked[0], True, client_axis)

  def _batched(self, fn: Callable, in_axes: tuple) -> Callable:
    """``fn`` vmapped over replicas (each device its own in replica mode); one run: ``fn``."""
    if not self.batched:
      return fn
    vfn = jax.vmap(fn, in_axes=in_axes)
    if self.mode != 'replicas':
      return vfn
    spec = lambda ax: jax.tree.map(
      lambda a: P(AXIS) if a == 0 else P(), ax, is_leaf=lambda a: a is None
    )
    return jax.shard_map(
      vfn, mesh=self.mesh, in_specs=spec(in_axes), out_specs=P(AXIS), check_vma=False
    )

  def _program_key(self, algorithm, schedule, compute_dtype, record_params) -> tuple | None:
    """What decides a run's compiled functions without ``build``: the algorithm (rules by
    identity), plan, placement and, for a ``prepare`` hook, the schedules; None if unhashable."""
    try:
      hash(algorithm)
    except TypeError:
      return None
    facts = (
      self.regime, self.ring_size, self.max_steps, self.num_slots, self.block_size,
      self.adaptive_steps, self.report_slots, bool(record_params), str(compute_dtype),
      self.mesh, self.mode, self.batched, self.shard_clients,
      jax.tree.structure(self.axes), tuple(jax.tree.leaves(self.axes)),
    )  # fmt: skip
    prep = algorithm.prepare and tuple(s.digest() for s in engine._list(schedule))
    return (algorithm, prep, facts)

  def _compile(self, record_params: bool) -> _Compiled:
    constrain = engine._identity
    if self.mode == 'clients' and self.num_devices > 1:
      by_slot = NamedSharding(self.mesh, P(AXIS))
      constrain = lambda t: jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, by_slot), t)
    program = engine.make_program(
      self._build, ring_size=self.ring_size, max_steps=self.max_steps, num_slots=self.num_slots,
      block_size=self.block_size, by_steps=self.adaptive_steps, report_slots=self.report_slots,
      record_params=record_params, constrain=constrain,
      mesh=self.mesh if self.mode == 'clients' and self.num_devices > 1 else None,
    )  # fmt: skip
    init = self._batched(program.init, (0, 0, self.axes, 0, 0))
    return _Compiled(program, init, jax.jit(self._batched(program.params, (0, 0))), {}, {})

  def _state_sharding(self, shape: SimState) -> SimState:
    lead = int(self.batched)
    if self.mode == 'replicas':
      return jax.tree.map(lambda _: NamedSharding(self.mesh, P(AXIS)), shape)
    rep = lambda t: jax.tree.map(lambda _: NamedSharding(self.mesh, P()), t)
    by_client = P(*([None] * lead), AXIS) if self.shard_clients and self.num_devices > 1 else P()
    per_client = lambda t: jax.tree.map(
      lambda x: NamedSharding(self.mesh, by_client if x.ndim > lead else P()), t
    )
    return SimState(
      rep(shape.step), rep(shape.server), per_client(shape.clients), per_client(shape.compressor),
      rep(shape.ring),
    )  # fmt: skip

  def _keys(self, keys: jax.Array) -> jax.Array:
    data = jax.random.key_data(keys)
    if self.batched and data.shape[0] != self.num_replicas:
      raise ValueError(f'keys must have a leading axis of {self.num_replicas} replicas.')
    return jax.random.wrap_key_data(self._place(data))

  def _init_args(self, params: Any, keys: jax.Array) -> tuple:
    steps = np.stack([engine.per_client_steps(s) for s in self.schedules])
    return (
      jax.tree.map(self._place, params), self._keys(keys), self.problem, self.hparams,
      self._runs(steps),
    )  # fmt: skip

  # ---- planning ----------------------------------------------------------------------
  def estimate(self, params: Any, keys: jax.Array) -> dict[str, int]:
    """Analytic memory by component and ``'total'`` (bytes, nothing allocated); arguments as
    :meth:`init` takes them."""
    return self._report(jax.eval_shape(self._compiled.init, *self._init_args(params, keys)), params)

  def _report(self, shape: SimState, params: Any) -> dict[str, int]:
    one = lambda x: jax.ShapeDtypeStruct(np.shape(x)[int(self.batched) :], x.dtype)
    return memory.estimate(
      shape, jax.tree.map(one, params), self.problem, self.axes, num_slots=self.num_slots,
      block_size=self.block_size, num_devices=self.num_devices, num_replicas=self.padded,
      replicas_sharded=self.mode == 'replicas',
    )  # fmt: skip

  def client_bytes(self, params: Any) -> int:
    """:func:`afl_jax.core.memory.client_step_bytes` of one run's ``params``."""
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), params)
    return memory.client_step_bytes(self.problem, shapes, self.axes)

  # ---- running -----------------------------------------------------------------------
  def init(self, params: Any, keys: jax.Array) -> SimState:
    """The state before step 0 (R runs: axis R); InsufficientMemoryError if ``self.memory``
    does not fit."""
    args = self._init_args(params, keys)
    shape = jax.eval_shape(self._compiled.init, *args)
    self.memory = self._report(shape, params)
    memory.check(self.memory, self.memory_limit_bytes or memory.available_bytes())
    self._state_shardings = self._state_sharding(shape)
    make = lambda: jax.jit(self._compiled.init, out_shardings=self._state_shardings)
    return self._by_sharding(self._compiled.inits, make)(*args)

  def args(self, state: SimState, keys: jax.Array, start: int | None = None) -> tuple:
    """:meth:`runner`'s arguments for the chunk from ``start`` (default: the state's); the placed
    step inputs' leaves are [(R,) chunk, ...]."""
    start = self.position(state) if start is None else start
    one = lambda s, p: engine.step_inputs(s, self.regime, start, self.chunk_size, self.num_slots, p)
    stacked = [np.stack(a) for a in zip(*map(one, self.schedules, self.ring_plans))]
    slot_axis = 1 if self.mode == 'clients' else None
    active = np.arange(start, start + self.chunk_size) < self.num_steps
    inputs = StepInputs(
      *[self._runs(a, slot_axis) for a in stacked[:-2]],
      self._runs(stacked[-2]),
      self._place(active, per_run=False),
    )
    return state, inputs, self.problem, self._keys(keys), self.hparams

  def runner(self) -> Callable:
    """The jitted chunk ``(state, inputs, problem, keys, hparams) -> (state, outputs)``."""
    if self._state_shardings is None:
      raise ValueError('call init() (or restore a state) before running.')
    if self._run is None:
      out = NamedSharding(self.mesh, P(AXIS) if self.mode == 'replicas' else P())
      inputs = StepInputs(*([0] * 7), None)  # one 'active' flag shared by the replicas
      chunk = self._batched(self._chunk, (0, inputs, self.axes, 0, 0))
      shardings = (self._state_shardings, out)
      make = lambda: jax.jit(chunk, donate_argnums=(0,), out_shardings=shardings)
      self._run = self._by_sharding(self._compiled.runners, make)
    return self._run

  def _by_sharding(self, cache: dict, make: Callable[[], Callable]) -> Callable:
    key = (jax.tree.structure(self._state_shardings), tuple(jax.tree.leaves(self._state_shardings)))
    return cache[key] if key in cache else cache.setdefault(key, make())

  def position(self, state: SimState) -> int:
    return int(np.max(to_host(state.step)))

  def run_chunk(self, state: SimState, keys: jax.Array) -> tuple[SimState, dict]:
    """Up to ``chunk_size`` steps from ``state`` (donated); outputs [(R,) steps, ...] on the
    host, zero past a replica's own schedule."""
    start = self.position(state)
    if start >= self.num_steps:
      raise ValueError(f'the longest schedule has {self.num_steps} steps; state is at {start}.')
    valid = min(self.chunk_size, self.num_steps - start)
    state, out = self.runner()(*self.args(state, keys, start))
    if not self.batched:
      return state, jax.tree.map(lambda a: to_host(a)[:valid], out)
    live = start + np.arange(valid) < self.replica_steps[:, None]

    def host(a):
      a = to_host(a)[: self.num_replicas, :valid]
      return np.where(live.reshape(live.shape + (1,) * (a.ndim - 2)), a, 0)

    return state, jax.tree.map(host, out)

  def drive(
    self, state: SimState, keys: jax.Array, after_chunk: Callable[[SimState, int, dict], Any]
  ) -> tuple[SimState, str]:
    """The one chunk loop (api and pipeline): :meth:`run_chunk` to the end; ``after_chunk(state,
    pos, out)`` (``pos``: the chunk's first step) returning a status stops there. Returns
    ``(state, status)``, 'completed' at the end."""
    while (pos := self.position(state)) < self.num_steps:
      state, out = self.run_chunk(state, keys)
      status = after_chunk(state, pos, out)
      if status is not None:
        return state, status
    return state, 'completed'

  def params(self, state: SimState) -> Any:
    """The global model(s) of ``state`` (R runs: leading axis R, on the host)."""
    out = self._compiled.params(state, self.hparams)
    if not self.batched:  # several processes: each gets its host copy
      return out if jax.process_count() == 1 else jax.tree.map(to_host, out)
    return jax.tree.map(lambda a: to_host(a)[: self.num_replicas], out)


# ---- the replica axis of a sweep: traced hyperparameters, stacked problems ----------
# Float hyperparameters that set a shape (Top-k's k = fraction * d): never traced.
STRUCTURAL = ('fraction',)


def is_traced(name: str, default: Any, value: Any) -> bool:
  """Is ``value`` one number per replica: a 1-D array, or numbers where the factory's default is
  a float (or None and the numbers floats), unless ``name`` sets a shape."""
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
  """``(static, traced)``: the values given per replica as float64[R]; the rest static."""
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


def _same(a: Any, b: Any) -> bool:
  if a is b:
    return True
  a, b = np.asarray(a), np.asarray(b)
  return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def stack_problems(problems: Sequence[Problem]) -> tuple[Problem, Problem]:
  """One problem for R replicas and its ``in_axes``: client views stacked, a ``shared`` leaf or
  the sizes stacked only where the replicas differ."""
  first = problems[0]
  static = lambda q: (q.loss_fn, q.sample_fn, q.num_clients, jax.tree.structure(q))
  if any(static(p) != static(first) for p in problems[1:]):
    raise ValueError('replicas must share loss_fn, sample_fn, num_clients and data structure.')
  stack = lambda *xs: np.stack([np.asarray(x) for x in xs])
  shared_leaves = list(zip(*[jax.tree.leaves(p.shared) for p in problems]))
  same = [all(_same(ls[0], x) for x in ls[1:]) for ls in shared_leaves]
  treedef = jax.tree.structure(first.shared)
  sizes = [p.client_sizes for p in problems]
  same_sizes = sizes[0] is None or all(_same(sizes[0], s) for s in sizes[1:])
  stacked = first.replace(
    client_views=jax.tree.map(stack, *[p.client_views for p in problems]),
    shared=jax.tree.unflatten(
      treedef, [ls[0] if s else stack(*ls) for ls, s in zip(shared_leaves, same)]
    ),
    client_sizes=sizes[0] if same_sizes else stack(*sizes),
  )
  axes = first.replace(
    client_views=jax.tree.map(lambda _: 0, first.client_views),
    shared=jax.tree.unflatten(treedef, [None if s else 0 for s in same]),
    client_sizes=None if same_sizes else 0,
  )
  return stacked, axes


def stack_trees(trees: Sequence[Any]) -> Any:
  """R pytrees -> one pytree with a leading replica axis."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


class _Compiled(NamedTuple):  # reused by every Simulator of the same program key
  program: engine.Program
  init: Callable
  params: Callable
  inits: dict  # state placement -> jitted init
  runners: dict  # state placement -> jitted chunk


_COMPILED: collections.OrderedDict[tuple, _Compiled] = collections.OrderedDict()
_KEEP = 16  # programs kept, least recently used first out


__all__ = ['Simulator', 'split_hparams', 'stack_problems', 'stack_trees']
