"""The two entry points: one run, ``afl_jax.simulate``; R runs in one program, ``afl_jax.sweep``.

``simulate`` replays a schedule and returns every iterate (verification)::

  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1, server_lr=1.0)
  problem = afl_jax.problems.from_loss(loss_fn, client_data, full_batch=True)
  schedule = afl_jax.schedules.from_arrays(client_ids, start_step, local_steps=2)
  result = afl_jax.simulate(alg, problem, schedule, params0, jax.random.key(0))
  result.params_history  # params after server steps 0..T-1, leading axis T

``sweep`` runs many runs of one algorithm in one compiled program::

  keys = jax.random.split(jax.random.key(0), 3)
  res = afl_jax.sweep('fedbuff', problem, schedule, params0, keys,
                      client_lr=[0.05, 0.1, 0.2], server_lr=1.0)
  res.params      # final params of each run, leading axis R = 3
  res.metrics     # per-step metrics, each [R, T]

Its first argument is a registered name (hyperparameters given as keywords, float
ones per replica) or an already built :class:`~afl_jax.core.types.Algorithm` (the
same for every replica, as ``simulate`` takes it). Replica r equals
``simulate(algorithms.get('fedbuff', client_lr=lr[r], ...), problem_r, schedule_r,
params0_r, keys[r])`` (tests/sweep_test.py); :mod:`afl_jax.core.simulator` says how
the runs are stacked and placed.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from afl_jax.algorithms import registry
from afl_jax.core import replicas
from afl_jax.core.engine import SimState
from afl_jax.core.problem import Problem, check_params, describe_tree
from afl_jax.core.simulator import ReplicaSimulator, Simulator
from afl_jax.core.types import Algorithm, prepared
from afl_jax.errors import ArgumentError
from afl_jax.schedules.schedule import Schedule


# ---- one run -------------------------------------------------------------------------------
class Result(NamedTuple):
  """What :func:`simulate` returns: every iterate and every per-step metric.

  ``params_history`` is always filled here (``simulate`` records the params); with
  :class:`~afl_jax.core.simulator.Simulator`, ``run_chunk``'s output has ``'params'`` only
  with ``record_params=True``, and ``sweep``'s ``params_history`` is None
  unless ``record_params=True``.

  ``metrics`` maps a name to an array ``[T]`` (one value per server step):

  * ``'arrivals'``: the number of valid arrivals (messages sent) at the step;
  * ``'bits_up'``, ``'bits_down'``: bits of the step's uploads and broadcasts (32 per
    transmitted value, exact counts for compressed messages);
  * ``'client/<name>'``: each client metric averaged over the clients that trained at
    the step, e.g. ``'client/train_loss'`` (every local rule) or
    ``'client/variate_evicted'`` (FedAC);
  * ``'server/<name>'``: each server metric, e.g. ``'server/update_norm'`` (most
    servers), ``'server/server_lr'`` / ``'server/beta'`` / ``'server/nu'`` (FedGM),
    ``'server/aggregations'`` (FedFa), ``'server/weight_max'`` (FedAC).

  ``list(result.metrics)`` shows the keys of a given algorithm.

  ``history_steps[h]`` is how many server steps were applied before
  ``params_history[h]`` (1, 2, ..., T; with ``keep_every=k``: k, 2k, ...).
  ``evaluations`` (with an ``eval_fn``) holds ``'step'`` (0, k, 2k, ..., and T) and one
  array per key ``eval_fn`` returns, the value on the params after that many steps.
  """

  params_history: Any  # params after each kept server step, leading axis T (or H)
  metrics: dict  # per-step metrics, each [T]; keys in the docstring above
  final_state: SimState  # the engine's state after the last step (server, clients, ring)
  history_steps: np.ndarray | None = None  # int[H] steps applied before each kept iterate
  evaluations: dict | None = None  # 'step': int[E] and each eval_fn value, [E]


def _period(name: str, k: Any) -> int:
  if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
    raise ArgumentError(f'{name} must be an integer >= 1; got {k!r}.')
  return int(k)


def _host(tree: Any) -> Any:
  """A host copy (the state's buffers are donated to the next chunk)."""
  return jax.tree.map(lambda x: np.array(x, copy=True), tree)


def _chunk(chunk_size: int | None, *periods: int | None) -> int | None:
  """The scan length: a divisor of every period (so each kept/evaluated step ends a chunk)."""
  given = [p for p in periods if p is not None]
  if not given:
    return chunk_size
  return math.gcd(*given, *([chunk_size] if chunk_size else []))


class _History:
  """The kept iterates and evaluations of a run (or of R runs: ``evaluate`` batches them)."""

  def __init__(self, keep_every, eval_fn, eval_every, num_steps, evaluate):
    self.keep, self.every, self.t = keep_every, eval_every, num_steps
    self.eval_fn, self.evaluate = eval_fn, evaluate
    self.steps, self.params, self.evals = [], [], []

  def see(self, step: int, params: Callable[[], Any]) -> None:
    """After ``step`` server steps (a chunk end): keep and evaluate where due."""
    if self.keep is not None and step > 0 and step % self.keep == 0:
      self.steps.append(step)
      self.params.append(params())
    if self.eval_fn is not None and (step % self.every == 0 or step == self.t):
      values = self.evaluate(self.eval_fn, params())
      self.evals.append({'step': step, **{k: np.asarray(v) for k, v in values.items()}})

  def result(self, axis: int) -> tuple[Any, np.ndarray | None, dict | None]:
    stack = lambda *xs: np.stack(xs, axis=axis)
    history = jax.tree.map(stack, *self.params) if self.params else None
    evals = None
    if self.evals:
      evals = {k: np.stack([e[k] for e in self.evals], axis=-1) for k in self.evals[0]}
      evals['step'] = np.asarray([e['step'] for e in self.evals], np.int64)
    steps = np.asarray(self.steps, np.int64) if self.keep is not None else None
    return history, steps, evals


def simulate(
  algorithm: Algorithm,
  problem: Problem,
  schedule: Schedule,
  params0: Any,
  key: jax.Array,
  *,
  chunk_size: int | None = None,
  keep_every: int = 1,
  eval_fn: Callable[[Any], dict] | None = None,
  eval_every: int = 1,
) -> Result:
  """Run ``algorithm`` on ``problem`` along ``schedule`` from ``params0``.

  Works in float64 when ``jax_enable_x64`` is on and ``params0`` is float64.

  Args:
    keep_every: keep the params after every ``keep_every``-th server step only
      (``result.history_steps``; 1: every iterate).
    eval_fn: ``eval_fn(params) -> dict`` of scalars, e.g. accuracy on held-out data,
      called on the initial params, after every ``eval_every`` server steps and at the
      end (``result.evaluations``).
    eval_every: the evaluation period in server steps.

  Raises:
    ArgumentError: ``params0`` does not fit ``problem`` (its structure or leaf
      shapes are not what ``loss_fn`` reads; checked before compiling), or a period
      that is not an integer >= 1.
    ScheduleError: ``schedule`` was built for another number of clients than
      ``problem`` has (pass ``num_clients=`` to its builder).
    ArgumentError: ``key`` is not one PRNG key (an int, or several keys).
  """
  _check_key(key)
  check_params(problem, params0)
  keep = _period('keep_every', keep_every)
  every = _period('eval_every', eval_every) if eval_fn is not None else None
  t = schedule.num_steps
  record = keep == 1  # every iterate: recorded inside the scan
  chunk = _chunk(chunk_size, None if record else keep, every)
  sim = Simulator(algorithm, problem, schedule, chunk_size=chunk, record_params=record)
  state = sim.init(params0, key)
  hist = _History(None if record else keep, eval_fn, every, t, lambda f, p: f(p))
  hist.see(0, lambda: _host(sim.params(state)))
  params, metrics = [], []
  while sim.position(state) < t:
    state, out = sim.run_chunk(state, key)
    if record:
      params.append(out['params'])
    metrics.append(out['metrics'])
    hist.see(sim.position(state), lambda: _host(sim.params(state)))
  cat = lambda *xs: jax.numpy.concatenate(xs, axis=0)
  kept, steps, evals = hist.result(axis=0)
  if record:
    kept, steps = jax.tree.map(cat, *params), np.arange(1, t + 1)
  return Result(kept, jax.tree.map(cat, *metrics), state, steps, evals)


# ---- R runs in one program -------------------------------------------------------------
class SweepResult(NamedTuple):
  """Results of R runs; every field has a leading replica axis R.

  Steps past the end of a replica's own (shorter) schedule are zero in ``metrics``
  and ``params_history``; ``num_steps[r]`` says where replica r ends.
  """

  params: Any  # final global params, [R, ...]
  metrics: dict  # per-step metrics, each [R, T] (T = the longest schedule)
  num_steps: np.ndarray  # int[R] each replica's own number of server steps
  params_history: Any  # [R, T, ...] with record_params=True, [R, H, ...] with keep_every
  final_state: SimState  # leading axis R (padded replicas included on a multi-device mesh)
  history_steps: np.ndarray | None = None  # int[H] with keep_every: k, 2k, ...
  evaluations: dict | None = None  # with eval_fn: 'step' int[E], each value [R, E]


def _check_key(key: Any) -> None:
  """``key`` is one PRNG key: a typed key of shape () or a raw uint32 key ([2]; [4] rbg)."""
  dtype = getattr(key, 'dtype', None)
  typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
  shape = tuple(np.shape(key)) if dtype is not None else None
  if (typed and shape == ()) or (not typed and dtype == np.uint32 and shape in ((2,), (4,))):
    return
  if typed and len(shape) == 1:
    got = f'{shape[0]} keys ({dtype} of shape {shape}); simulate runs one replica, '
    got += 'afl_jax.sweep runs one per key'
  else:
    got = type(key).__name__ if dtype is None else f'{dtype} of shape {shape}'
  raise ArgumentError(f'key must be one PRNG key; got {got}. Pass jax.random.key(seed).')


def _as_list(x: Any, r: int, what: str) -> list:
  if isinstance(x, list | tuple):
    if len(x) != r:
      raise ArgumentError(f'got {len(x)} {what} for {r} replicas (keys); give one or {r}.')
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
  name: str | Algorithm,
  problem: Problem | Sequence[Problem],
  schedules: Schedule | Sequence[Schedule],
  num_replicas: int,
  **kwargs: Any,
) -> ReplicaSimulator:
  """The :class:`~afl_jax.core.simulator.ReplicaSimulator` of a sweep (arguments as
  :func:`replica_simulator`, hyperparameters as :func:`sweep`).

  Validates every replica's hyperparameters on the host: the values shared by the
  replicas against their ranges (``ALGORITHMS.bind``), then each replica's factory is
  called once with its concrete values (the error names the replica); see
  :func:`replica_simulator`, which takes values checked already. ``factory``
  (default: ``algorithms.get(name, run=run, **hparams)``) builds the algorithm from
  keyword hyperparameters, e.g. to wrap it in a compressor; it is called inside the
  trace with the traced ones. ``name`` may also be a built :class:`Algorithm` (then
  no hyperparameters, ``run`` or ``factory``: every replica runs that algorithm).
  """
  if isinstance(name, str):  # shared values once (not as 'replica 0'); unknown names: here
    options = inspect.signature(replica_simulator).parameters
    hparams = {k: v for k, v in kwargs.items() if k not in options}
    defaults = registry.hyperparameters(name)
    _as_list(schedules, num_replicas, 'schedules')
    static, _ = replicas.split_hparams(defaults, hparams, num_replicas)
    registry.ALGORITHMS.bind(
      name, {k: v for k, v in static.items() if k in defaults}, in_config=False
    )
  return replica_simulator(name, problem, schedules, num_replicas, **kwargs)


def replica_simulator(
  name: str | Algorithm,
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
  client_block_size: int | None = None,
  **hparams: Any,
) -> ReplicaSimulator:
  """:func:`simulator` for hyperparameters whose ranges were checked already (a validated
  config's: ``afl_jax.pipeline.sweep``); each replica's factory is still called once on
  the host."""
  if isinstance(name, Algorithm):
    given = sorted(hparams) + [k for k, v in (('run', run), ('factory', factory)) if v is not None]
    if given:
      raise ArgumentError(
        f'sweep got the built algorithm {name.name!r} and {given}: a built Algorithm '
        'carries its hyperparameters; to sweep over them pass a registered name instead, '
        "e.g. sweep('fedbuff', ..., client_lr=[0.05, 0.1]) "
        '(names: afl_jax.algorithms.names()).'
      )
    algorithm = name
    factory, defaults = (lambda: algorithm), {}
  elif isinstance(name, str):
    if factory is None:
      factory = functools.partial(registry.get, name, run=run)
    defaults = registry.hyperparameters(name)
  else:
    raise ArgumentError(
      f'sweep takes a registered algorithm name (afl_jax.algorithms.names()) or an '
      f'afl_jax.Algorithm; got {type(name).__name__} {name!r}.'
    )
  r = num_replicas
  schedule_list = _as_list(schedules, r, 'schedules')
  distinct = list({id(s): s for s in schedule_list}.values())  # each checked once in prepare
  static, traced = replicas.split_hparams(defaults, hparams, r)
  algorithms = []
  for i in range(r):
    try:
      alg = factory(**static, **replicas.replica_values(traced, i))
      # Prepared against every replica's schedule: one compiled program (and one state
      # shape, e.g. MasFL's history depth) must suit them all.
      algorithms.append(prepared(alg, distinct))
    except ValueError as e:
      raise type(e)(f'replica {i}: {e}') from e
  if isinstance(problem, list | tuple):
    if len(problem) != r:
      raise ArgumentError(f'got {len(problem)} problems for {r} replicas (keys); give one or {r}.')
    stacked, axes = replicas.stack_problems(problem)
  else:
    stacked, axes = problem, replicas.shared_problem_axes(problem)
  return ReplicaSimulator(
    build_fn(factory, static, distinct),
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
    client_block_size=client_block_size,
  )


def run_replicas(
  sim: ReplicaSimulator,
  params0: Any,
  keys: jax.Array,
  *,
  params_per_replica: bool = False,
  keep_every: int | None = None,
  eval_fn: Callable[[Any], dict] | None = None,
  eval_every: int = 1,
) -> SweepResult:
  """Run ``sim`` from ``params0`` (shared, or stacked with ``params_per_replica``) to the end.

  ``keep_every`` and ``eval_fn`` as :func:`sweep` takes them; ``sim``'s chunk size must
  divide their periods (:func:`sweep` picks it so).
  """
  r = sim.num_replicas
  if not params_per_replica:
    params0 = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (r,) + np.shape(x)), params0)
  state = sim.init(params0, keys)
  every = eval_every if eval_fn is not None else None
  batched = jax.jit(jax.vmap(eval_fn)) if eval_fn is not None else None  # the R replicas at once
  hist = _History(keep_every, eval_fn, every, sim.num_steps, lambda f, p: batched(p))
  hist.see(0, lambda: _host(sim.params(state)))
  outs = []
  while sim.position(state) < sim.num_steps:
    state, out = sim.run_chunk(state, keys)
    outs.append(out)
    hist.see(sim.position(state), lambda: _host(sim.params(state)))
  out = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *outs)
  kept, steps, evals = hist.result(axis=1)
  return SweepResult(
    params=sim.params(state),
    metrics=out['metrics'],
    num_steps=sim.replica_steps,
    params_history=out.get('params') if keep_every is None else kept,
    final_state=state,
    history_steps=steps,
    evaluations=evals,
  )


def _num_replicas(keys: Any) -> int:
  """R from ``keys``: [R] typed PRNG keys (or raw uint32 [R, 2]), R >= 1."""
  dtype = getattr(keys, 'dtype', None)
  typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
  shape = tuple(np.shape(keys)) if dtype is not None else None
  ok = (typed and len(shape) == 1) or (not typed and dtype == np.uint32 and len(shape) == 2)
  if not ok:
    got = type(keys).__name__ if dtype is None else f'{dtype} of shape {shape}'
    raise ArgumentError(
      f'keys must be R PRNG keys, one per replica; got {got}. Pass '
      'jax.random.split(jax.random.key(seed), R).'
    )
  if shape[0] == 0:
    raise ArgumentError(
      'keys holds no keys (R = 0 replicas); pass one key per replica, '
      'jax.random.split(jax.random.key(seed), R) with R >= 1.'
    )
  return int(shape[0])


def _check_params(problem: Any, params0: Any, r: int, params_per_replica: bool) -> None:
  """``params0`` fits the (first) problem; stacked params have the leading axis R."""
  first = problem[0] if isinstance(problem, list | tuple) and problem else problem
  if not params_per_replica:
    check_params(first, params0)
    return
  for leaf in jax.tree.leaves(params0):
    if np.ndim(leaf) < 1 or np.shape(leaf)[0] != r:
      raise ArgumentError(
        f'params_per_replica=True needs every leaf of params0 to have a leading axis of '
        f'R={r} (one per key); params0 has {describe_tree(params0, "params0")}. Stack '
        'R initial params, or pass params_per_replica=False to share one.'
      )
  check_params(first, jax.tree.map(lambda x: x[0], params0), name='params0[0]')


def sweep(
  name: str | Algorithm,
  problem: Problem | Sequence[Problem],
  schedules: Schedule | Sequence[Schedule],
  params0: Any,
  keys: jax.Array,
  *,
  params_per_replica: bool = False,
  keep_every: int | None = None,
  eval_fn: Callable[[Any], dict] | None = None,
  eval_every: int = 1,
  **options: Any,
) -> SweepResult:
  """Run R replicas of algorithm ``name`` in one compiled program.

  Args:
    name: a registered algorithm (``afl_jax.algorithms.names()``), or a built
      :class:`~afl_jax.core.types.Algorithm` run by every replica (as
      :func:`afl_jax.simulate` takes it; no ``**hparams`` then).
    problem: one problem shared by all replicas, or R problems (same loss and
      sampler; their client views are stacked, shared leaves stacked where they
      differ, see :func:`afl_jax.core.replicas.stack_problems`).
    schedules: one schedule for all replicas or R of them (any lengths and widths).
    params0: initial params shared by all replicas, or stacked [R, ...] with
      ``params_per_replica=True``.
    keys: [R] PRNG keys, one per replica; R is ``len(keys)``.
    params_per_replica: ``params0`` has a leading replica axis.
    keep_every: keep every replica's params after every ``keep_every``-th server
      step only (``params_history`` [R, H, ...], ``history_steps``); None: every
      iterate with ``record_params=True``, none without.
    eval_fn: ``eval_fn(params) -> dict`` of scalars on one replica's params (written
      in JAX: it is vmapped over the R replicas), called on the initial params, every
      ``eval_every`` server steps and at the end (``evaluations``, values [R, E]).
    eval_every: the evaluation period in server steps.
    **options: the keyword arguments of :func:`simulator`:
      run: run context for factories that take it (``registry.RunInfo``).
      chunk_size: server steps per compiled scan (default: the longest schedule).
      record_params: also return the params after every step (``params_history``).
      mesh: device mesh with an axis 'clients' (default: all devices). Replicas are
        sharded over it when there are at least as many replicas as devices.
      memory_limit_bytes: refuse sweeps whose analytic memory exceeds 90% of this.
      local_step_buckets: clients with different K: 0 (default) pads them to the
        largest K; B >= 1 sorts each replica's arrivals by K into B blocks; None picks
        B (:class:`~afl_jax.core.simulator.ReplicaSimulator`). Results do not depend on it.
      compute_dtype: the clients' loss and gradients in this dtype (e.g.
        ``jnp.bfloat16``), float32 state; None: the params' dtype.
      client_block_size: train a step's arrival slots in blocks of this many clients
        (bounds the temporaries of very large steps; the result does not depend on it).
      hyperparameters (every other keyword): the algorithm's. A float hyperparameter
        may be a sequence of R values (one per replica, traced); anything else is
        shared and structural (part of the compiled program).

  Raises:
    ConfigError: a replica's hyperparameter is outside its range (checked on the
      host for every replica before any compute; the message names the replica,
      the field, the value and the allowed range).
    ArgumentError: no keys, ``params0`` that does not fit the problem, or a built
      Algorithm given with hyperparameters.
    ValueError: other invalid combinations (the message names the replica).
  """
  r = _num_replicas(keys)
  _check_params(problem, params0, r, params_per_replica)
  keep = None if keep_every is None else _period('keep_every', keep_every)
  every = _period('eval_every', eval_every) if eval_fn is not None else None
  if keep is not None or every is not None:
    options['chunk_size'] = _chunk(options.get('chunk_size'), keep, every)
    if keep is not None and options.get('record_params'):
      raise ArgumentError('give keep_every or record_params=True (every iterate), not both.')
  sim = simulator(name, problem, schedules, r, **options)
  return run_replicas(
    sim,
    params0,
    keys,
    params_per_replica=params_per_replica,
    keep_every=keep,
    eval_fn=eval_fn,
    eval_every=eval_every,
  )


__all__ = ['Result', 'SweepResult', 'run_replicas', 'simulate', 'simulator', 'sweep']
