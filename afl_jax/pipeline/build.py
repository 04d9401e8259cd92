"""``build_run(config) -> Run``: everything a run needs, validated once, before any compute
(docs/architecture.md, "The path of a run"); each refusal a ConfigError naming the field."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from afl_jax import algorithms, compression, data, models, schedules
from afl_jax.algorithms import RunInfo
from afl_jax.core import memory
from afl_jax.core.problem import Problem
from afl_jax.core.simulator import Simulator
from afl_jax.core.types import Algorithm
from afl_jax.errors import ConfigError, UserError
from afl_jax.pipeline import cache, own_code, record, sizes, task
from afl_jax.pipeline import config as config_lib


class Recipe(NamedTuple):
  """``make(**hparams) -> Algorithm``, run context and compressor bound (a sweep traces it)."""

  name: str
  hparams: dict[str, Any]
  make: Callable[..., Algorithm]


@dataclasses.dataclass(frozen=True)
class Cadence:
  """Chunks end every ``eval_every`` server steps, are checkpointed every ``checkpoint_every``
  (0: never); this invocation stops ``stop_after_steps`` after its first step (0: at the end)."""

  eval_every: int
  checkpoint_every: int = 0
  stop_after_steps: int = 0

  def due(self, first: int, end: int, num_steps: int) -> tuple[bool, bool]:
    """(checkpoint, stop) after the chunk ending at ``end`` of a run started at ``first``."""
    stop = bool(self.stop_after_steps) and end - first >= self.stop_after_steps
    every = bool(self.checkpoint_every) and end % self.checkpoint_every == 0
    return end < num_steps and (stop or every), end < num_steps and stop


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
  """A built run; ``config`` is only recorded and shown, never read to decide compute."""

  config: ml_collections.ConfigDict
  data: data.ClientLayout
  model: nn.Module
  params0: Any
  key: jax.Array
  local_steps: np.ndarray  # int[N] K_i
  schedule: schedules.Schedule
  algorithm: Algorithm
  problem: Problem
  evaluator: task.Evaluator
  info: RunInfo
  dtype: Any
  identity: dict[str, Any]  # record.identity
  engine: dict[str, Any]  # the Simulator's options (engine_options)
  cadence: Cadence
  memory_fields: dict[str, tuple[str, Any]]  # who sets each memory component (sizes)
  work_fields: dict[str, Any]  # the values that multiply its work (sizes.WORK_FIELDS)
  recipe: Recipe
  sim: Simulator | None = None  # planned, nothing compiled (None: a sweep's point)
  work: dict[str, Any] | None = None  # sizes.check_work
  memory: dict[str, int] | None = None  # Simulator.estimate
  refusal: str | None = None  # why train.py refuses it (build_run(strict=False))


_err = ConfigError.invalid


def _section_error(field: str, value: Any, make: Callable[[], Any]) -> Any:
  """``make()``; what the factory still rejects names ``field``."""
  try:
    return make()
  except UserError:
    raise
  except (ValueError, TypeError) as e:
    raise _err(field, value, f'{e}'.rstrip('.') + '.') from None


# ---- data ---------------------------------------------------------------------------------
_LOADED = cache.Scoped()  # (dataset, digest) per loader arguments, within reusing_data()


def reusing_data() -> contextlib.AbstractContextManager[None]:
  """Within the block a dataset is loaded (and digested) once per loader arguments."""
  return _LOADED.scope()


def _load(c, given: data.ArrayDataset | None = None) -> tuple[data.ArrayDataset, str]:
  fields = ('dataset', 'dataset_args', 'data_dir', 'download', 'seed', 'train_subset')
  key = json.dumps(record.canonical({k: c.get(k) for k in fields}), sort_keys=True)

  def load() -> tuple[data.ArrayDataset, str]:
    ds = load_dataset(c, given)
    arrays = (ds.train_x, ds.train_y, ds.test_x, ds.test_y)
    return ds, record._sha(*(np.asarray(a) for a in arrays))

  return load() if given is not None else _LOADED.get(key, load)


def load_dataset(c, given: data.ArrayDataset | None = None) -> data.ArrayDataset:
  """``c.dataset`` (or ``given``), optionally a seeded subset of its training split."""
  ds = given
  if ds is None:
    args = dict(c.get('dataset_args') or {})
    ds = data.make(c.dataset, data_dir=c.data_dir or None, download=c.download, seed=c.seed, **args)
  if c.train_subset:
    n = len(ds.train_y)
    keep = np.sort(np.random.default_rng(c.seed).choice(n, min(c.train_subset, n), replace=False))
    ds = ds._replace(train_x=ds.train_x[keep], train_y=ds.train_y[keep])
  return ds


def build_data(c: ml_collections.ConfigDict) -> data.ClientLayout:
  """Load ``c.dataset`` and lay it out over ``c.num_clients`` clients."""
  return data_and_source(c)[0]


def data_and_source(c, given: data.ArrayDataset | None = None) -> tuple[data.ClientLayout, str]:
  """:func:`build_data` (of ``given``) and a digest of the files read (seed 0, no subset; ''
  for a dataset generated per client)."""
  if data.DATASETS.meta(c.dataset).get('federated'):
    args = dict(c.get('dataset_args') or {})
    return data.make(c.dataset, num_clients=c.num_clients, seed=c.seed, **args), ''
  try:
    ds, source = _load(c, given)
    if given is None and (c.seed or c.train_subset):
      c0 = ml_collections.ConfigDict(c.to_dict())
      c0.seed, c0.train_subset = 0, 0
      with reusing_data():
        source = _load(c0)[1]
  except data.DataError as e:
    where = 'data_dir' if c.data_dir else 'dataset'
    raise data.DataError(f'config.{where}={c[where]!r} is invalid: {e}') from None
  n = len(ds.train_y)
  heldout = c.unlabeled_size if c.unlabeled_source == 'heldout' else 0  # external: none
  room = {'validation_size': n - 1, 'unlabeled_size': n - c.validation_size - 1}
  room['num_clients'] = n - c.validation_size - heldout  # the samples the clients share
  for field, most in room.items():  # in this order: each room assumes the ones before
    if (heldout if field == 'unlabeled_size' else c[field]) > most:
      raise _err(field, c[field], f'must be <= {most}, the training samples left for it.')
  try:
    layout = data.federate(
      ds, c.partition, c.num_clients, alpha=c.dirichlet_alpha,
      shards_per_client=c.shards_per_client, seed=c.seed, unlabeled_size=heldout,
      validation_size=c.validation_size,
    )  # fmt: skip
  except data.PartitionError as e:
    field = {'alpha': 'dirichlet_alpha'}.get(e.argument, e.argument)
    why = f'partition {c.partition!r} cannot give every client data: {e}.'
    raise _err(field, c[field], why) from None
  if c.unlabeled_source == 'heldout':
    return layout, source
  try:  # an external set: the clients keep every sample
    external = data.external_unlabeled(c.unlabeled_source, c.unlabeled_size, ds.train_x)
  except ValueError as e:
    raise _err('unlabeled_source', c.unlabeled_source, f'{e}.') from None
  return layout._replace(unlabeled_x=external), source


def client_local_steps(c: ml_collections.ConfigDict, sizes: np.ndarray) -> np.ndarray:
  """int32[N]: K_i (by steps, or ``local_epochs * ceil(n_i / batch_size)``)."""
  if c.local_epochs > 0:
    return c.local_epochs * data.steps_per_epoch(sizes, c.batch_size)
  return np.full(len(sizes), c.local_steps, np.int32)


# ---- model --------------------------------------------------------------------------------
def init_model(c: ml_collections.ConfigDict, model: nn.Module, key: jax.Array, x: jax.Array):
  """The model's initial variables; ConfigError for rejected settings, state beside its
  params (BatchNorm) or random streams (Dropout)."""
  try:
    variables = model.init(jax.random.fold_in(key, 1), x)
    extra = sorted(set(variables) - {'params'})
    if not extra:
      jax.eval_shape(model.apply, variables, x)  # a random stream it needs fails here
  except flax.errors.InvalidRngError as e:
    stream = re.search(r'needs PRNG for "(\w+)"', str(e))
    why = (
      f'model {c.model!r} draws random numbers ({stream[1] if stream else "an RNG stream"}), '
      'which the pipeline does not key; use a deterministic model.'
    )
    raise _err('model', c.model, why) from None
  except (ValueError, TypeError, flax.errors.FlaxError) as e:
    why = f'model {c.model!r} cannot be built with these settings on this data: {e}'
    raise _err('model_args', dict(c.get('model_args') or {}), why.rstrip('.') + '.') from None
  if extra:
    why = (
      f'model {c.model!r} keeps state beside its params (collections {extra}), which the '
      'pipeline does not carry; use e.g. GroupNorm for BatchNorm.'
    )
    raise _err('model', c.model, why)
  return variables


# ---- schedule -----------------------------------------------------------------------------
def build_schedule(
  c: ml_collections.ConfigDict, local_steps: np.ndarray, client_sizes: np.ndarray | None = None
) -> schedules.Schedule:
  """The delay model ``c.schedule.kind`` over ``c.num_rounds`` server steps."""
  s, n = c.schedule, len(local_steps)
  ctx = schedules.ScheduleContext(
    num_clients=n,
    num_steps=c.num_rounds,
    local_steps=np.asarray(local_steps),
    client_sizes=np.ones(n, np.int64) if client_sizes is None else np.asarray(client_sizes),
    seed=s.seed if s.seed >= 0 else c.seed,
  )
  takes = schedules.settings(s.kind) if s.kind in schedules.SCHEDULES else ()
  given = {k: s[k] for k in takes if k in s}
  schedule = _section_error(
    'schedule.kind', s.kind, lambda: schedules.make(s.kind, ctx=ctx, **given)
  )
  if not np.any(schedule.mask):  # only a waiting window can be too short for every job
    field = 'wait_seconds' if 'wait_seconds' in takes else 'kind'
    why = f'no client ever arrives in the {c.num_rounds} server steps of this schedule.'
    raise _err(f'schedule.{field}', s[field], why)
  return schedule


# ---- algorithm ----------------------------------------------------------------------------
def algorithm_factory(c: ml_collections.ConfigDict, info: RunInfo) -> Callable[..., Algorithm]:
  """``factory(**hparams)``: ``c.algorithm`` with the run context and ``c.compressor``."""
  kind, compressor = c.compressor.kind, None
  if kind != 'none':
    given = {k: c.compressor[k] for k in compression.settings(kind) if k in c.compressor}
    compressor = _section_error('compressor.kind', kind, lambda: compression.make(kind, **given))
    if c.compressor.error_feedback:
      compressor = compression.error_feedback(compressor)
  context = {field: getattr(info, field) for field in algorithms.ALGORITHMS.context(c.algorithm)}

  def factory(**hparams: Any) -> Algorithm:
    algorithm = algorithms.make(c.algorithm, **hparams, **context)
    if compressor is None:
      return algorithm
    if algorithm.compressor is not None:
      why = f'algorithm {c.algorithm!r} already compresses; set its config.hparams.compressor.'
      raise _err('compressor.kind', kind, why)
    return algorithm._replace(compressor=compressor)

  return factory


def build_algorithm(c: ml_collections.ConfigDict, info: RunInfo, factory=None) -> Algorithm:
  """:func:`algorithm_factory` (or ``factory``) with ``c.hparams``."""
  make = factory or algorithm_factory(c, info)
  return _section_error('algorithm', c.algorithm, lambda: make(**dict(c.hparams)))


def engine_options(c: ml_collections.ConfigDict) -> dict[str, Any]:
  """The Simulator's options (0 blocks, -1 buckets, 'dtype': None, the engine chooses)."""
  buckets = int(c.local_step_buckets)
  return {
    'local_step_buckets': None if buckets < 0 else buckets,
    'compute_dtype': None if c.compute_dtype == 'dtype' else jnp.dtype(c.compute_dtype),
    'client_block_size': c.client_block_size or None,
  }


@contextlib.contextmanager
def engine_refusal(engine: dict[str, Any]):
  """The engine's refusal of its options (``plan_slots``) as the config's one-line error."""
  try:
    yield
  except ValueError as e:
    if 'local_step_buckets' not in str(e):
      raise
    why = f'must be -1 or 0 with client_block_size={engine["client_block_size"]}'
    raise _err('local_step_buckets', engine['local_step_buckets'], why) from None


# ---- the whole run --------------------------------------------------------------------------
def build_run(config: ml_collections.ConfigDict, *, dataset=None, strict: bool = True) -> Run:
  """Validate ``config`` once, build the run and :func:`plan` it, nothing compiled.
  ``dataset``: arrays for the files; ``strict=False``: a refusal is kept in ``Run.refusal``."""
  c = config_lib.validate(config)  # an invalid value is named as such before an unread one
  config_lib.refuse_unread(config, c)
  return plan(_build(c, dataset), strict=strict)


def build_point(config: ml_collections.ConfigDict, *, dataset=None) -> Run:
  """A sweep's grid point, built as :func:`build_run` builds it; the sweep plans its group."""
  return _build(config_lib.validate(config), dataset)


def plan(run: Run, *, strict: bool = True, memory_limit_bytes: int | None = None) -> Run:
  """``run`` with its Simulator, its work and analytic memory checked (limit: the backend's)."""
  limit = memory.available_bytes() if memory_limit_bytes is None else memory_limit_bytes
  with engine_refusal(run.engine):
    sim = Simulator(
      run.algorithm, run.problem, run.schedule, chunk_size=run.cadence.eval_every,
      memory_limit_bytes=limit, **run.engine,
    )  # fmt: skip
  report, refusal, work = sim.estimate(run.params0, run.key), None, None
  try:
    log = None if strict else (lambda line: None)
    work = sizes.check_work(run.work_fields, sim, run.params0, log=log)
    sizes.check_memory(report, limit, run.memory_fields)
  except ConfigError as e:
    if strict:
      raise
    refusal = str(e)
  return dataclasses.replace(run, sim=sim, work=work, memory=report, refusal=refusal)


def _build(c: ml_collections.ConfigDict, dataset: data.ArrayDataset | None) -> Run:
  """Every part of the run of the validated ``c`` but its Simulator."""
  sizes.check(c)  # host-side sizes (schedule, generated data) before allocating them
  if c.dtype == 'float64':
    jax.config.update('jax_enable_x64', True)
  dtype = jnp.dtype(c.dtype)
  layout, source = data_and_source(c, dataset)
  model = models.make(c.model, num_classes=layout.num_classes, **dict(c.get('model_args') or {}))
  local_steps = client_local_steps(c, layout.sizes)
  schedule = build_schedule(c, local_steps, layout.sizes)
  key = jax.random.key(c.seed)
  params0 = init_model(c, model, key, jnp.asarray(layout.x[layout.index[:1]], dtype))
  params0 = jax.tree.map(lambda x: x.astype(dtype), params0)
  apply_fn = models.fast_apply(model.apply)  # clients and server; the evaluator keeps lax's
  info = RunInfo(
    num_clients=layout.num_clients,
    arrivals_per_step=schedule.max_arrivals,
    local_steps=int(np.median(local_steps)),
    num_rounds=c.num_rounds,
    apply_fn=apply_fn,
    unlabeled_x=jnp.asarray(layout.unlabeled_x, dtype),
  )
  recipe = Recipe(c.algorithm, dict(c.hparams), algorithm_factory(c, info))
  return Run(
    config=c,
    data=layout,
    model=model,
    params0=params0,
    key=key,
    local_steps=local_steps,
    schedule=schedule,
    algorithm=build_algorithm(c, info, recipe.make),
    problem=task.make_problem(layout, apply_fn, c.batch_size, dtype),
    evaluator=task.make_evaluator(
      model.apply, layout, seed=c.seed, train_samples=c.eval_train_samples, dtype=dtype
    ),
    info=info,
    dtype=dtype,
    identity=identity(c, layout, schedule, source),
    engine=engine_options(c),
    cadence=Cadence(int(c.eval_every), int(c.checkpoint_every), int(c.stop_after_steps)),
    memory_fields=sizes.memory_fields(c),
    work_fields={k: c[k] for k in sizes.WORK_FIELDS},
    recipe=recipe,
  )


def built_identity(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The identity of ``config``'s run from its data and schedule alone (nothing compiled)."""
  c = config_lib.validate(config)
  layout, source = data_and_source(c)
  schedule = build_schedule(c, client_local_steps(c, layout.sizes), layout.sizes)
  return identity(c, layout, schedule, source)


def components(c: ml_collections.ConfigDict) -> list[tuple[str, Any]]:
  """``(what, callable)`` besides afl_jax's own code: the registered components the run names
  and any callable in its config (an optax schedule)."""
  s = c.schedule
  used = [
    (algorithms.ALGORITHMS, c.algorithm),
    (schedules.SCHEDULES, s.kind),
    (schedules.DISTRIBUTIONS, s.get('durations')),
    (compression.COMPRESSORS, c.compressor.kind),
    (data.DATASETS, c.dataset),
    (models.MODELS, c.model),
  ]
  out = [(f'{reg.kind} {name!r}', reg.factory(name)) for reg, name in used if name in reg]

  def held(x: Any, field: str) -> None:
    if hasattr(x, 'items'):
      for k, v in x.items():
        held(v, f'{field}.{k}' if field else k)
    elif isinstance(x, list | tuple):
      for i, v in enumerate(x):
        held(v, f'{field}[{i}]')
    elif callable(x):
      out.append((f'config.{field}', x))

  held(c, '')
  return out


def identity(c: ml_collections.ConfigDict, layout, schedule, source: str) -> dict[str, Any]:
  trace = c.schedule.get('trace') if c.schedule.kind == 'trace' else None
  return record.identity(
    c,
    data=record.data_digest(layout),
    schedule=schedule.digest(),
    code=own_code.digests(components(c)),
    sources={'dataset': source, 'trace': record.file_digest(trace) if trace else ''},
  )
