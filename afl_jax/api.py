"""The entry points: one run, :func:`simulate`; R runs in one program, :func:`sweep` (replica r
equals the single run of its values); both drive a :class:`Simulator` with :func:`run`."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from afl_jax.algorithms import ALGORITHMS, RunInfo
from afl_jax.core.engine import SimState
from afl_jax.core.problem import Problem, check_params
from afl_jax.core.simulator import Simulator, split_hparams, stack_problems
from afl_jax.core.types import Algorithm, prepared
from afl_jax.errors import ArgumentError
from afl_jax.schedules.schedule import Schedule


class Result(NamedTuple):
  """What :func:`simulate` and :func:`sweep` return (a sweep's fields: leading axis R).

  ``metrics``: per server step, ``'arrivals'``, ``'bits_up'`` / ``'bits_down'`` (32 per value
  sent), ``'client/<name>'`` (mean over the clients that trained) and ``'server/<name>'``; zero
  past a replica's own schedule. ``params_history[h]``: the model after ``history_steps[h]``
  steps; ``evaluations``: ``'step'`` and each ``eval_fn`` value."""

  params: Any  # the final global model
  metrics: dict  # each [T] ([R, T]; T = the longest schedule)
  params_history: Any  # [H, ...] ([R, H, ...]); None unless recorded or kept
  final_state: SimState
  num_steps: Any  # server steps of the schedule (int[R] for a sweep)
  history_steps: np.ndarray | None = None  # int[H]
  evaluations: dict | None = None  # 'step': int[E] and each eval_fn value, [E] ([R, E])


def _period(name: str, k: Any) -> int:
  if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
    raise ArgumentError(f'{name} must be an integer >= 1; got {k!r}.')
  return int(k)


def _chunk(chunk_size: int | None, *periods: int | None) -> int | None:
  """The scan length: a divisor of every period (so each kept/evaluated step ends a chunk)."""
  given = [p for p in periods if p is not None]
  return math.gcd(*given, *([chunk_size] if chunk_size else [])) if given else chunk_size


def run(sim: Simulator, params0: Any, keys: jax.Array, *, keep_every: int | None = None,
        eval_fn: Callable[[Any], dict] | None = None, eval_every: int = 1) -> Result:  # fmt: skip
  """Run ``sim`` from ``params0`` to the end (its chunk size divides both periods)."""
  state = sim.init(params0, keys)
  evaluate = jax.jit(jax.vmap(eval_fn)) if eval_fn is not None and sim.batched else eval_fn
  kept, kept_steps, evals, outs = [], [], [], []

  def see(state: SimState, pos: int, out: dict | None = None) -> None:  # after each chunk
    if out is not None:
      outs.append(out)
    step = sim.position(state)
    due_keep = keep_every is not None and step > 0 and step % keep_every == 0
    due_eval = eval_fn is not None and (step % eval_every == 0 or step == sim.num_steps)
    # a host copy: the state's buffers are donated to the next chunk
    params = (due_keep or due_eval) and jax.tree.map(np.array, sim.params(state))
    if due_keep:
      kept_steps.append(step)
      kept.append(params)
    if due_eval:
      evals.append({'step': step, **{k: np.asarray(v) for k, v in evaluate(params).items()}})

  see(state, 0)
  state, _ = sim.drive(state, keys, see)
  axis = int(sim.batched)
  out = jax.tree.map(lambda *xs: np.concatenate(xs, axis=axis), *outs)
  history, steps = out.get('params'), None
  if keep_every is not None:
    history = jax.tree.map(lambda *xs: np.stack(xs, axis=axis), *kept) if kept else None
    steps = np.asarray(kept_steps, np.int64)
  elif history is not None:
    steps = np.arange(1, sim.num_steps + 1)
  evaluations = None
  if evals:
    evaluations = {k: np.stack([e[k] for e in evals], axis=-1) for k in evals[0]}
    evaluations['step'] = np.asarray([e['step'] for e in evals], np.int64)
  num_steps = sim.replica_steps if sim.batched else sim.num_steps
  return Result(sim.params(state), out['metrics'], history, state, num_steps, steps, evaluations)


def simulate(algorithm: Algorithm, problem: Problem, schedule: Schedule, params0: Any,
             key: jax.Array, *, chunk_size: int | None = None, keep_every: int = 1,
             eval_fn: Callable[[Any], dict] | None = None, eval_every: int = 1
             ) -> Result:  # fmt: skip
  """Run ``algorithm`` on ``problem`` along ``schedule`` from ``params0``, keeping the params
  every ``keep_every`` steps and calling ``eval_fn(params) -> dict`` at step 0, every
  ``eval_every`` steps and at the end. ArgumentError / ScheduleError before compiling."""
  _num_keys(key, one=True)
  check_params(problem, params0)
  keep = _period('keep_every', keep_every)
  every = _period('eval_every', eval_every) if eval_fn is not None else None
  record = keep == 1  # every iterate: recorded inside the scan
  chunk = _chunk(chunk_size, None if record else keep, every)
  sim = Simulator(algorithm, problem, schedule, chunk_size=chunk, record_params=record)
  keep = None if record else keep
  return run(sim, params0, key, keep_every=keep, eval_fn=eval_fn, eval_every=every or 1)


def _num_keys(key: Any, one: bool) -> int | None:
  """None for one PRNG key (typed, shape (); raw uint32 [2] or [4]), R for R keys (typed [R]; raw
  [R, 2]); else (or, ``one``, for R keys) simulate's / sweep's ArgumentError."""
  dtype = getattr(key, 'dtype', None)
  typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
  raw = not typed and dtype == np.uint32
  shape = tuple(np.shape(key)) if dtype is not None else None
  single = (typed and shape == ()) or (raw and shape in ((2,), (4,)))
  n = shape[0] if (typed and len(shape) == 1) or (raw and len(shape) == 2) else -1
  got = type(key).__name__ if dtype is None else f'{dtype} of shape {shape}'
  split = 'jax.random.split(jax.random.key(seed), R)'
  if one and not single:
    if n >= 0 and typed:
      got = f'{n} keys ({got}); simulate runs one replica, afl_jax.sweep runs one per key'
    raise ArgumentError(f'key must be one PRNG key; got {got}. Pass jax.random.key(seed).')
  if not one and n == 0:
    raise ArgumentError(f'keys holds no keys (R = 0 replicas); pass {split} with R >= 1.')
  if not one and n < 0:
    raise ArgumentError(f'keys must be R PRNG keys, one per replica; got {got}. Pass {split}.')
  return None if one else n


def _as_list(x: Any, r: int, what: str) -> list:
  if isinstance(x, list | tuple):
    if len(x) != r:
      raise ArgumentError(f'got {len(x)} {what} for {r} replicas (keys); give one or {r}.')
    return list(x)
  return [x] * r


def simulator(name: str | Algorithm, problem: Problem | Sequence[Problem],
              schedules: Schedule | Sequence[Schedule], num_replicas: int, *,
              run: RunInfo | None = None, factory: Callable[..., Algorithm] | None = None,
              chunk_size: int | None = None, record_params: bool = False,
              mesh: Mesh | None = None, memory_limit_bytes: int | None = None,
              local_step_buckets: int | None = 0, compute_dtype: Any = None,
              client_block_size: int | None = None, **hparams: Any) -> Simulator:  # fmt: skip
  """The Simulator of a sweep of ``num_replicas`` runs (arguments as :func:`sweep`); each
  replica's ``factory`` (default ``algorithms.make``) is called once on the host, so a bad value
  fails before compute naming the replica, then inside the trace on the traced values."""
  r = num_replicas
  schedule_list = _as_list(schedules, r, 'schedules')
  if isinstance(name, Algorithm):
    given = sorted(hparams) + [k for k, v in (('run', run), ('factory', factory)) if v is not None]
    if given:
      raise ArgumentError(
        f'sweep got the built algorithm {name.name!r} and {given}: to sweep over settings pass '
        "a registered name instead, e.g. sweep('fedbuff', ..., client_lr=[0.05, 0.1])."
      )
    factory, defaults = (lambda algorithm=name: algorithm), {}
  elif isinstance(name, str):
    defaults = ALGORITHMS.settings(name)  # an unknown name fails here
  else:
    raise ArgumentError(
      f'sweep takes an algorithm name or an afl_jax.Algorithm; got {type(name).__name__} {name!r}.'
    )
  distinct = list({id(s): s for s in schedule_list}.values())
  static, traced = split_hparams(defaults, hparams, r)
  if factory is None:  # the values shared by the replicas checked once, not as 'replica 0'
    factory = functools.partial(ALGORITHMS.make, name, facts=run)
    shared = {k: v for k, v in static.items() if k in defaults}
    ALGORITHMS.bind(name, shared, in_config=False)
  first = None
  for i in range(r):
    try:
      values = {k: float(v[i]) for k, v in traced.items()}
      alg = prepared(factory(**static, **values), distinct)  # one state shape for all
    except ValueError as e:
      raise type(e)(f'replica {i}: {e}') from e
    shape = (alg.regime, alg.compressor is None, alg.init is None)
    first = first or (alg, shape)
    if shape != first[1]:
      raise ValueError(f'replica {i} builds another regime, compressor or init: sweep it apart.')
  stacked, axes = problem, None
  if isinstance(problem, list | tuple):
    stacked, axes = stack_problems(_as_list(problem, r, 'problems'))
  return Simulator(
    first[0], stacked, schedule_list, build=lambda values: factory(**static, **values),
    hparams=traced, problem_axes=axes, chunk_size=chunk_size, record_params=record_params,
    mesh=mesh, memory_limit_bytes=memory_limit_bytes, local_step_buckets=local_step_buckets,
    compute_dtype=compute_dtype, client_block_size=client_block_size,
  )  # fmt: skip


def sweep(name: str | Algorithm, problem: Problem | Sequence[Problem],
          schedules: Schedule | Sequence[Schedule], params0: Any, keys: jax.Array, *,
          keep_every: int | None = None, eval_fn: Callable[[Any], dict] | None = None,
          eval_every: int = 1, **options: Any) -> Result:  # fmt: skip
  """Run R replicas of algorithm ``name`` (or a built Algorithm) in one compiled program.

  ``problem``, ``schedules``: one shared, or R; ``params0``: shared; ``keys``: [R]; ``keep_every``
  / ``eval_fn`` as in :func:`simulate`.
  ``**options``: :func:`simulator`'s keywords and the hyperparameters, a float one optionally R
  values (traced); a value out of range is a ConfigError naming the replica."""
  r = _num_keys(keys, one=False)
  check_params(problem[0] if isinstance(problem, list | tuple) and problem else problem, params0)
  keep = None if keep_every is None else _period('keep_every', keep_every)
  every = _period('eval_every', eval_every) if eval_fn is not None else None
  if keep is not None or every is not None:
    options['chunk_size'] = _chunk(options.get('chunk_size'), keep, every)
    if keep is not None and options.get('record_params'):
      raise ArgumentError('give keep_every or record_params=True (every iterate), not both.')
  sim = simulator(name, problem, schedules, r, **options)
  params0 = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (r,) + np.shape(x)), params0)
  return run(sim, params0, keys, keep_every=keep, eval_fn=eval_fn, eval_every=every or 1)


__all__ = ['Result', 'run', 'simulate', 'simulator', 'sweep']
