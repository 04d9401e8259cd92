"""``build_run(config) -> Run``: everything a run needs, validated once, before any compute
(docs/architecture.md, "The path of a run"). Checks that need the loaded data raise a
:class:`~afl_jax.errors.ConfigError` naming the config field to change."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

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
from afl_jax.pipeline import cache, own_code, record, sizes, task, track
from afl_jax.pipeline import config as config_lib


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
  """A built run: what the loop (or a sweep) needs, nothing it has to look up in the config.

  ``local_steps``: int[N] K_i; ``info``: the run context handed to the algorithm's factory;
  ``identity``: what its numbers depend on (:func:`afl_jax.pipeline.record.identity`)."""

  config: ml_collections.ConfigDict
  data: data.ClientLayout
  model: nn.Module
  params0: Any
  key: jax.Array
  local_steps: np.ndarray
  schedule: schedules.Schedule
  algorithm: Algorithm
  problem: Problem
  evaluator: task.Evaluator
  info: RunInfo
  dtype: Any
  identity: dict[str, Any]
  engine: dict[str, Any]  # the Simulator's options (:func:`engine_options`)
  cadence: track.Cadence  # chunk length, checkpoints, stop
  memory_fields: dict[str, tuple[str, Any]]  # who sets each memory component (sizes)
  work_fields: dict[str, Any]  # the values that multiply its work (sizes.WORK_FIELDS)
  name: str  # the algorithm's registered name, built by ``factory(**hparams)``
  hparams: dict[str, Any]
  factory: Callable[..., Algorithm]  # :func:`algorithm_factory`: a sweep traces through it
  sim: Simulator | None = None  # planned, nothing compiled (:func:`build_run`; None: a point)
  work: dict[str, Any] | None = None  # its client training (:func:`sizes.check_work`)
  memory: dict[str, int] | None = None  # its analytic memory (Simulator.estimate)
  refusal: str | None = None  # why train.py refuses it (``build_run(strict=False)``)


def _err(field: str, value: Any, why: str) -> ConfigError:
  return ConfigError.invalid(field, value, why)


# ---- data ---------------------------------------------------------------------------------
_LOADED = cache.Scoped()  # (dataset, digest) per loader arguments, within reusing_data()


def reusing_data() -> contextlib.AbstractContextManager[None]:
  """Within the block a dataset is loaded (and digested) once per loader arguments (a sweep's
  points, a reproduction's records); outside, every build reads its files anew."""
  return _LOADED.scope()


def _load(
  c: ml_collections.ConfigDict, given: data.ArrayDataset | None = None
) -> tuple[data.ArrayDataset, str]:
  """(the dataset, a SHA-256 of its arrays); ``given``: the dataset to use in place of
  ``c.dataset``'s files (then not kept)."""
  fields = ('dataset', 'dataset_args', 'data_dir', 'download', 'seed', 'train_subset')
  key = json.dumps(record.canonical({k: c.get(k) for k in fields}), sort_keys=True)

  def load() -> tuple[data.ArrayDataset, str]:
    ds = load_dataset(c, given)
    arrays = (np.asarray(ds.train_x), np.asarray(ds.train_y), np.asarray(ds.test_x))
    return ds, record._sha(*arrays, np.asarray(ds.test_y))

  return load() if given is not None else _LOADED.get(key, load)


def _source(c: ml_collections.ConfigDict, digest: str, given: bool = False) -> str:
  """A seed-independent digest of the files ``c.dataset`` reads: its arrays as loaded with
  seed 0 and no subset (a loader may split by seed: scikit-learn's digits); ``given``: a
  dataset given in place of the files, its own."""
  if given or (c.seed == 0 and not c.train_subset):
    return digest
  c0 = ml_collections.ConfigDict(c.to_dict())
  c0.seed, c0.train_subset = 0, 0
  with reusing_data():
    return _load(c0)[1]


def load_dataset(
  c: ml_collections.ConfigDict, given: data.ArrayDataset | None = None
) -> data.ArrayDataset:
  """The centralized dataset ``c.dataset`` (or ``given``), its loader given ``c.dataset_args``
  (optionally a seeded subset of its training split)."""
  args = dict(c.get('dataset_args') or {})
  ds = given
  if ds is None:
    ds = data.make(c.dataset, data_dir=c.data_dir or None, download=c.download, seed=c.seed, **args)
  if c.train_subset:
    rng = np.random.default_rng(c.seed)
    n = len(ds.train_y)
    keep = np.sort(rng.choice(n, size=min(c.train_subset, n), replace=False))
    ds = ds._replace(train_x=ds.train_x[keep], train_y=ds.train_y[keep])
  return ds


# The config field behind each argument of ``data.federate`` a partition error names.
_PARTITION_FIELDS = {
  'num_clients': 'num_clients',
  'alpha': 'dirichlet_alpha',
  'shards_per_client': 'shards_per_client',
}


def build_data(c: ml_collections.ConfigDict) -> data.ClientLayout:
  """Load ``c.dataset`` and lay it out over ``c.num_clients`` clients."""
  return data_and_source(c)[0]


def data_and_source(
  c: ml_collections.ConfigDict, given: data.ArrayDataset | None = None
) -> tuple[data.ClientLayout, str]:
  """:func:`build_data` (of the dataset ``given``, if one is) and a seed-independent digest of
  the files read (:func:`_source`; '' for a dataset generated per client, which the config
  determines)."""
  entry = data.DATASETS.meta(c.dataset)
  if entry.get('federated'):
    args = dict(c.get('dataset_args') or {})
    return data.make(c.dataset, num_clients=c.num_clients, seed=c.seed, **args), ''
  try:
    ds, digest = _load(c, given)
    source = _source(c, digest, given is not None)
  except data.DataError as e:
    where = 'data_dir' if c.data_dir else 'dataset'
    raise data.DataError(f'config.{where}={c[where]!r} is invalid: {e}') from None
  n = len(ds.train_y)
  if c.validation_size >= n:
    raise _err('validation_size', c.validation_size, f'must be < the {n} training samples.')
  heldout = c.unlabeled_size if c.unlabeled_source == 'heldout' else 0  # external: none
  if heldout >= n - c.validation_size:
    raise _err(
      'unlabeled_size',
      c.unlabeled_size,
      f'must be < the {n - c.validation_size} training samples left after validation_size.',
    )
  owned = n - c.validation_size - heldout
  if c.num_clients > owned:
    raise _err(
      'num_clients',
      c.num_clients,
      f'must be <= the number of training samples the clients share ({owned}: '
      f'{n} minus validation_size and unlabeled_size).',
    )
  try:
    layout = data.federate(
      ds,
      c.partition,
      c.num_clients,
      alpha=c.dirichlet_alpha,
      shards_per_client=c.shards_per_client,
      seed=c.seed,
      unlabeled_size=heldout,
      validation_size=c.validation_size,
    )
  except data.PartitionError as e:
    field = _PARTITION_FIELDS[e.argument]
    raise _err(
      field, c[field], f'partition {c.partition!r} cannot give every client data: {e}.'
    ) from None
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
  """The model's initial variables, or a ConfigError (before anything is written) for a model
  the pipeline cannot train: one the settings reject, or one with state beside its params
  (BatchNorm's statistics) or random streams (Dropout's keys), which clients would have to
  carry and the run to key."""
  args = dict(c.get('model_args') or {})
  try:  # each setting was checked by validate; what the model still rejects is a combination
    variables = model.init(jax.random.fold_in(key, 1), x)
    extra = sorted(set(variables) - {'params'})
    if not extra:
      jax.eval_shape(model.apply, variables, x)  # a random stream it needs fails here
  except flax.errors.InvalidRngError as e:
    stream = re.search(r'needs PRNG for "(\w+)"', str(e))
    why = (
      f'model {c.model!r} draws random numbers ({stream[1] if stream else "an RNG stream"}: '
      'Dropout or the like), which the pipeline does not key; use a deterministic model (e.g. '
      'Dropout(deterministic=True))'
    )
    raise _err('model', c.model, why + '.') from None
  except (ValueError, TypeError, flax.errors.FlaxError) as e:
    why = f'model {c.model!r} cannot be built with these settings on this data: {e}'
    raise _err('model_args', args, why.rstrip('.') + '.') from None
  if extra:
    why = (
      f'model {c.model!r} keeps state beside its params (collections {extra}: BatchNorm '
      'statistics or the like), which the pipeline does not carry per client; use a model '
      'without it (e.g. GroupNorm or LayerNorm for BatchNorm)'
    )
    raise _err('model', c.model, why + '.')
  return variables


# ---- schedule -----------------------------------------------------------------------------
def build_schedule(
  c: ml_collections.ConfigDict, local_steps: np.ndarray, client_sizes: np.ndarray | None = None
) -> schedules.Schedule:
  """The delay model ``c.schedule.kind`` over ``c.num_rounds`` server steps (its settings
  checked by ``validate``); ConfigError when it rejects them or no client ever arrives."""
  s = c.schedule
  n = len(local_steps)
  ctx = schedules.ScheduleContext(
    num_clients=n,
    num_steps=c.num_rounds,
    local_steps=np.asarray(local_steps),
    client_sizes=np.ones(n, np.int64) if client_sizes is None else np.asarray(client_sizes),
    seed=s.seed if s.seed >= 0 else c.seed,
  )
  takes = schedules.settings(s.kind) if s.kind in schedules.SCHEDULES else ()
  values = {k: s[k] for k in takes if k in s}  # the kind's own (validate refused strays)
  try:
    schedule = schedules.make(s.kind, ctx=ctx, **values)
  except UserError:
    raise
  except ValueError as e:
    raise _err('schedule.kind', s.kind, f'{e}'.rstrip('.') + '.') from None
  if not np.any(schedule.mask):  # only a waiting window can be too short for every job
    field = 'wait_seconds' if 'wait_seconds' in schedules.settings(s.kind) else 'kind'
    raise _err(
      f'schedule.{field}',
      s[field],
      f'no client ever arrives in the {c.num_rounds} server steps of this schedule '
      '(every step is empty); lengthen the waiting window or shorten the job durations.',
    )
  return schedule


# ---- algorithm ----------------------------------------------------------------------------
def build_compressor(c: ml_collections.ConfigDict) -> compression.Compressor | None:
  """``c.compressor`` as a Compressor (None for kind 'none'), from the settings
  ``config.validate`` bound (checked) once: the factory is called with them as they are."""
  if 'compressor' not in c or c.compressor.kind == 'none':
    return None
  kind = c.compressor.kind
  given = {k: c.compressor[k] for k in compression.settings(kind) if k in c.compressor}
  try:
    compressor = compression.make(kind, **given)
    return compression.error_feedback(compressor) if c.compressor.error_feedback else compressor
  except UserError:
    raise
  except ValueError as e:
    raise _err('compressor.kind', kind, f'{e}'.rstrip('.') + '.') from None


def algorithm_factory(c: ml_collections.ConfigDict, info: RunInfo) -> Callable[..., Algorithm]:
  """``factory(**hparams) -> Algorithm``: the entry ``c.algorithm`` with the run context and
  ``c.compressor``; a single run calls it with ``c.hparams``, a sweep with traced values."""
  compressor = build_compressor(c)
  context = {field: getattr(info, field) for field in algorithms.ALGORITHMS.context(c.algorithm)}

  def factory(**hparams: Any) -> Algorithm:
    algorithm = algorithms.make(c.algorithm, **hparams, **context)
    if compressor is None:
      return algorithm
    if algorithm.compressor is not None:
      raise _err(
        'compressor.kind',
        c.compressor.kind,
        f'algorithm {c.algorithm!r} is a preset that already compresses its messages '
        f'(config.hparams.compressor={c.hparams.get("compressor")!r}); set its compressor '
        "through config.hparams, or use algorithm='asynfl' with config.compressor.",
      )
    return algorithm._replace(compressor=compressor)

  return factory


def build_algorithm(
  c: ml_collections.ConfigDict, info: RunInfo, factory: Callable[..., Algorithm] | None = None
) -> Algorithm:
  """:func:`algorithm_factory` (or ``factory``) with ``c.hparams``; what the factory still
  rejects (a combination of values) is an error of the ``algorithm`` section."""
  try:
    return (factory or algorithm_factory(c, info))(**dict(c.hparams))
  except UserError:
    raise
  except (ValueError, TypeError) as e:
    raise _err('algorithm', c.algorithm, f'{e}'.rstrip('.') + '.') from None


# ---- engine options ---------------------------------------------------------------------------
def engine_options(c: ml_collections.ConfigDict) -> dict[str, Any]:
  """The Simulator's keyword arguments from the config: ``client_block_size`` (0: None),
  ``local_step_buckets`` (-1: None, chosen by the engine; a sweep's group pads instead, so
  its results stay bit for bit the committed records'; 0: padded; B: B blocks sorted by K)
  and ``compute_dtype``."""
  buckets = int(c.local_step_buckets)
  return {
    'local_step_buckets': None if buckets < 0 else buckets,
    'compute_dtype': None if c.compute_dtype == 'dtype' else jnp.dtype(c.compute_dtype),
    'client_block_size': c.client_block_size or None,
  }


# ---- the whole run --------------------------------------------------------------------------
def build_run(
  config: ml_collections.ConfigDict,
  *,
  dataset: data.ArrayDataset | None = None,
  strict: bool = True,
  memory_limit_bytes: int | None = None,
) -> Run:
  """Resolve and validate ``config`` once, build the run and :func:`plan` it; a field that
  cannot work is a UserError naming it, before anything is compiled. ``dataset``: arrays in
  place of the dataset's files; ``strict=False``: a refusal is kept in ``Run.refusal``."""
  c = config_lib.validate(config)  # an invalid value is named as such before an unread one
  config_lib.refuse_unread(config, c)
  run = _build(c, dataset)
  return plan(run, strict=strict, memory_limit_bytes=memory_limit_bytes)


def build_point(
  config: ml_collections.ConfigDict, *, dataset: data.ArrayDataset | None = None
) -> Run:
  """A sweep's grid point, built as :func:`build_run` builds it; the sweep plans its group."""
  return _build(config_lib.validate(config), dataset)


def plan(run: Run, *, strict: bool = True, memory_limit_bytes: int | None = None) -> Run:
  """``run`` with its Simulator (nothing compiled or allocated), its client training
  (:func:`sizes.check_work`) and analytic memory checked against ``memory_limit_bytes``
  (default: the backend's, fixed here so that the engine checks the same)."""
  limit = memory.available_bytes() if memory_limit_bytes is None else memory_limit_bytes
  sim = Simulator(
    run.algorithm,
    run.problem,
    run.schedule,
    chunk_size=run.cadence.eval_every,
    memory_limit_bytes=limit,
    **run.engine,
  )
  report, refusal, work = sim.estimate(run.params0, run.key), None, None
  try:
    work = sizes.check_work(
      run.work_fields, sim, run.params0, log=None if strict else (lambda line: None)
    )
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
  first = layout.x[layout.index[:1]]
  params0 = init_model(c, model, key, jnp.asarray(first, dtype))
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
  factory = algorithm_factory(c, info)
  algorithm = build_algorithm(c, info, factory)
  problem = task.make_problem(layout, apply_fn, c.batch_size, dtype)
  evaluator = task.make_evaluator(
    model.apply, layout, seed=c.seed, train_samples=c.eval_train_samples, dtype=dtype
  )
  return Run(
    config=c,
    data=layout,
    model=model,
    params0=params0,
    key=key,
    local_steps=local_steps,
    schedule=schedule,
    algorithm=algorithm,
    problem=problem,
    evaluator=evaluator,
    info=info,
    dtype=dtype,
    identity=identity(c, layout, schedule, source),
    engine=engine_options(c),
    cadence=track.Cadence(int(c.eval_every), int(c.checkpoint_every), int(c.stop_after_steps)),
    memory_fields=sizes.memory_fields(c),
    work_fields={k: c[k] for k in sizes.WORK_FIELDS},
    name=c.algorithm,
    hparams=dict(c.hparams),
    factory=factory,
  )


def built_identity(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The identity of the run ``config`` describes, from its data and schedule alone (nothing
  else built, trained or compiled): what reproduction records are compared with."""
  c = config_lib.validate(config)
  layout, source = data_and_source(c)
  schedule = build_schedule(c, client_local_steps(c, layout.sizes), layout.sizes)
  return identity(c, layout, schedule, source)


def components(c: ml_collections.ConfigDict) -> list[tuple[str, Any]]:
  """``(what, callable)`` of everything a run's numbers run through besides afl_jax's own
  code: the registered components it names and any callable in its config (an optax
  schedule as a learning rate)."""
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
  """The run's identity (:func:`afl_jax.pipeline.record.identity`) from what was built."""
  s = c.schedule
  trace = s.get('trace') if s.kind == 'trace' else None
  return record.identity(
    c,
    data=record.data_digest(layout),
    schedule=schedule.digest(),
    code=own_code.digests(components(c)),
    sources={'dataset': source, 'trace': record.file_digest(trace) if trace else ''},
  )
