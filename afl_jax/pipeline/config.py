"""Experiment configuration: the default and the field table, :func:`resolve` (components'
defaults from their factories) and :func:`validate` (ConfigError naming the field)."""

from __future__ import annotations

import copy
import difflib
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import ml_collections
from ml_collections.config_flags import config_path

from afl_jax import algorithms, checks, compression, data, models, schedules
from afl_jax.errors import ConfigError
from afl_jax.pipeline import record

DTYPES = ('float32', 'float64')
COMPUTE_DTYPES = ('dtype', 'bfloat16', 'float16', 'float32')  # 'dtype': no cast
SEED_MAX = 2**32 - 1  # NumPy and JAX seeds are uint32


def default() -> ml_collections.ConfigDict:
  """FedBuff on non-IID Fashion-MNIST with the MLP, 2-core sized."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.algorithm = 'fedbuff'
  c.hparams = ml_collections.ConfigDict({'client_lr': 0.05, 'server_lr': 1.0})
  # Message compression around ANY algorithm's client uploads ('none' = uncompressed).
  c.compressor = ml_collections.ConfigDict()
  c.compressor.kind = 'none'  # none | identity | top_k | sign | qsgd | top_k_qsgd
  c.compressor.fraction = 0.03  # top_k, top_k_qsgd: k/d
  c.compressor.bits = 4  # qsgd, top_k_qsgd: bits per coordinate incl. the sign
  c.compressor.scaled = False  # sign: times ||x||_1/d; top_k_qsgd: / (1 + beta)
  c.compressor.error_feedback = False
  # Data.
  c.dataset = 'fmnist'
  c.dataset_args = ml_collections.ConfigDict()  # the loader's own settings (its defaults)
  c.data_dir = ''  # '' = $AFL_JAX_DATA, then /usr/share/datasets/fashion-mnist
  c.download = False
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.5
  c.shards_per_client = 2
  c.num_clients = 100
  c.unlabeled_size = 0  # training samples held out for the server (FedEcho)
  c.unlabeled_source = 'heldout'  # heldout | digits | noise: the server's unlabeled set
  c.validation_size = 0  # training samples held out for validation (val_accuracy)
  c.train_subset = 0  # use only this many training samples (0 = all), for quick runs
  # Model and local training.
  c.model = 'mlp'
  c.model_args = ml_collections.ConfigDict()  # the model's settings, e.g. hidden_sizes
  c.batch_size = 32
  c.local_steps = 10  # used when local_epochs == 0
  c.local_epochs = 0  # > 0: K_i = local_epochs * ceil(n_i / batch_size), differs per client
  c.dtype = 'float32'
  c.client_block_size = 0  # > 0: train a step's clients in blocks of this size (memory)
  # Clients with different K: -1 = chosen from the schedule, 0 = all padded to the largest
  # K (masked steps), B >= 1 = sorted by K into B blocks, each to its own largest K.
  c.local_step_buckets = -1
  c.compute_dtype = 'dtype'  # clients' loss and gradients: 'dtype' (= config.dtype) | bfloat16
  # Delay model / schedule.
  c.schedule = ml_collections.ConfigDict()
  c.schedule.kind = 'fedbuff'
  c.schedule.concurrency = 20
  c.schedule.buffer_size = 10
  c.schedule.clients_per_step = 10
  c.schedule.window = 5  # random_staleness: last m versions
  c.schedule.staleness_bound = 10  # port: no arrival staler than B (Su & Li 2022)
  c.schedule.urgent = False  # port: stale jobs report early (Port-Urgent) instead of waiting
  c.schedule.local_steps_multipliers = ''  # e.g. '1,2,3,4,5,6' (random_staleness)
  c.schedule.wait_seconds = 0.0  # waiting_windows: seconds per round (0 = synchronous)
  # fedecho_*: gamma of Table 1's runtime categories (smaller: the largest clients are long)
  c.schedule.straggler_gamma = 1.0
  c.schedule.durations = 'uniform'  # constant | uniform | exponential | normal | ...
  # The distribution's parameters, e.g. {'low': 0, 'high': 20} (schedules.DISTRIBUTIONS).
  c.schedule.durations_params = ml_collections.ConfigDict()
  # Per-client factor on each duration: none | local_steps (K_i / mean K) |
  # lognormal (exp(client_speed_sigma * z) per client).
  c.schedule.client_speed = 'none'
  c.schedule.client_speed_sigma = 0.5
  c.schedule.seed = -1  # -1: derive from c.seed
  # Run.
  c.num_rounds = 200  # server steps T
  c.eval_every = 20
  c.eval_train_samples = 5000  # training-loss / gradient-norm estimate
  c.checkpoint_every = 0  # 0 = no checkpoints; else a multiple of eval_every
  c.stop_after_steps = 0  # stop (after checkpointing) once this invocation ran this many
  c.target_accuracy = 0.0  # > 0: record the first step / wall-clock reaching it
  c.sweep = ml_collections.ConfigDict()  # field -> values, a grid (afl_jax/pipeline/sweep.py)
  return c


def build(fields: Mapping[str, Any], hparams: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """:func:`default` with ``hparams`` and the dotted ``fields``: a config file's table entry."""
  c = default()
  c.hparams = copy.deepcopy(dict(hparams))
  for field, value in fields.items():
    open_section = field.rsplit('.', 1)[0] in OPEN_SECTIONS
    config_path.set_value(field, c, copy.deepcopy(value), accept_new_attributes=open_section)
  return c


# Sections holding the named component's arguments (validate refuses one it does not take).
OPEN_SECTIONS = ('hparams', 'model_args', 'dataset_args', 'schedule.durations_params')


def entry(table: Mapping[str, Any], name: str, file: str) -> Any:
  """``table[name]``, the entry ``--config=FILE:NAME`` names."""
  if name in table:
    return table[name]
  what = f'has no config {name!r}' if name else 'needs a config name'
  raise ConfigError(f'{file} {what}: give --config={file}:NAME, NAME one of {", ".join(table)}')


def exec_file(file: str) -> ModuleType:
  spec = importlib.util.spec_from_file_location('afl_jax_config_file', file)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def load_file(spec: str) -> ml_collections.ConfigDict:
  """The config ``--config=FILE[:NAME]`` names."""
  file, _, name = spec.partition(':')
  module = exec_file(file)
  return module.get_config(name) if name else module.get_config()


def import_beside(path: str, name: str) -> ModuleType:
  """Import module ``name`` from the directory of the config file ``path``."""
  file = os.path.join(os.path.dirname(os.path.abspath(path)), f'{name}.py')
  key = f'_afl_jax_beside_{os.path.abspath(file)}'
  if key not in sys.modules:
    spec = importlib.util.spec_from_file_location(key, file)
    if spec is None or spec.loader is None or not os.path.isfile(file):
      raise ImportError(f'no module {name!r} beside {path} ({file} does not exist)')
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # before exec: dataclasses look their module up while defined
    try:
      spec.loader.exec_module(module)
    except BaseException:
      del sys.modules[key]
      raise
  return sys.modules[key]


def set_algorithm(c: ml_collections.ConfigDict, name: str, **hparams: Any) -> None:
  """Set ``c.algorithm`` and the ``c.hparams`` given (resolve fills the rest)."""
  c.algorithm = name
  c.hparams = ml_collections.ConfigDict(hparams)


def _section(c, name: str, kinds, settings, kind: str | None, keep: tuple):
  """Section ``name`` with ``keep`` and the settings of ``kind`` (defaults filled); other
  kinds' settings dropped, one no kind takes kept for validate to refuse."""
  given, known = dict(c[name]), {k for each in kinds for k in settings(each)}
  out = {k: given[k] for k in keep if k in given}
  takes = settings(kind) if kind else {}
  out |= {k: given.get(k, d) for k, d in takes.items() if d is not inspect.Parameter.empty}
  out |= {k: v for k, v in given.items() if k not in out and k not in known}
  return ml_collections.ConfigDict(out)


def resolve(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A copy of ``c`` whose sections hold every value the run uses, and only those (each
  component's settings given, else its factory's defaults)."""
  out = ml_collections.ConfigDict(c.to_dict())
  base = default()
  for field, (counts, _) in COUNTS.items():
    try:
      if field in out and not counts(out):
        out[field] = base[field]
    except (AttributeError, KeyError, TypeError):  # a field it reads is missing: validate says so
      pass
  if c.algorithm in algorithms.ALGORITHMS:
    out.hparams = ml_collections.ConfigDict(
      algorithms.ALGORITHMS.defaults(c.algorithm) | dict(c.hparams)
    )
  for name, registry in NAMED.items():
    if c.get(name) in registry:
      given = dict(c.get(registry.section) or {})
      out[registry.section] = ml_collections.ConfigDict(registry.defaults(c[name]) | given)
  if 'schedule' in c and c.schedule.get('kind') in schedules.SCHEDULES:
    kinds, kind = schedules.SCHEDULES, c.schedule.kind
    out.schedule = _section(c, 'schedule', kinds, schedules.settings, kind, ('kind', 'seed'))
    params = out.schedule.get('durations_params', {})  # None: the distribution's defaults
    if out.schedule.get('durations') in schedules.DISTRIBUTIONS and (
      params is None or isinstance(params, Mapping | ml_collections.ConfigDict)
    ):
      kind = out.schedule.durations
      params = schedules.DISTRIBUTIONS.defaults(kind) | dict(params or {})
      out.schedule.durations_params = ml_collections.ConfigDict(params)
  kind = c.get('compressor', {}).get('kind')
  if kind == 'none' or kind in compression.COMPRESSORS:
    reg, keep = compression.COMPRESSORS, ('kind', 'error_feedback')
    out.compressor = _section(c, 'compressor', reg, reg.settings, kind != 'none' and kind, keep)
  return out


def _err(field: str, value: Any, allowed: str) -> ConfigError:
  return ConfigError.invalid(field, value, f'{allowed}.')


FIELDS: dict[str, checks.Spec] = {
  'seed': checks.integer(0, SEED_MAX),
  'num_rounds': checks.integer(1),
  'eval_every': checks.integer(1),
  'eval_train_samples': checks.integer(1),
  'checkpoint_every': checks.integer(0),
  'stop_after_steps': checks.integer(0),
  'target_accuracy': checks.real(0.0, 1.0),
  'dtype': checks.choice(DTYPES),
  'client_block_size': checks.integer(0, note=' (0 = all clients of a step at once)'),
  'local_step_buckets': checks.integer(
    -1,
    note=' (-1 = chosen from the local steps, 0 = every client padded to the largest K, '
    'B >= 1 = B blocks of clients sorted by K)',
  ),
  'compute_dtype': checks.choice(COMPUTE_DTYPES),
  'data_dir': checks.string(note=' (a path)'),
  'download': checks.boolean(),
  'partition': checks.choice(data.PARTITIONS),
  'num_clients': checks.integer(1),
  'unlabeled_source': checks.choice(data.UNLABELED_SOURCES),
  'unlabeled_size': checks.integer(0),
  'validation_size': checks.integer(0),
  'train_subset': checks.integer(0, note=' (0 = all)'),
  'batch_size': checks.integer(1),
  'local_epochs': checks.integer(0, note=' (0 = use local_steps)'),
  'schedule.seed': checks.integer(-1, SEED_MAX, note=' (-1 = derive from config.seed)'),
  'compressor.error_feedback': checks.boolean(),
}
# Fields read (and checked) only where another field makes them count; elsewhere resolve sets
# the default.
COUNTS: dict[str, tuple[Any, checks.Spec]] = {
  'dirichlet_alpha': (lambda c: c.partition == 'dirichlet', checks.real(0.0, low_open=True)),
  'shards_per_client': (lambda c: c.partition == 'shards', checks.integer(1)),
  'local_steps': (lambda c: c.local_epochs == 0, checks.integer(1)),
}
# Fields resolve keeps that the run does not read where the predicate holds.
IGNORED = {'compressor.error_feedback': lambda c: c.compressor.get('kind') == 'none'}
# Fields checked only where another field makes them count.
WHEN: dict[str, tuple[Any, checks.Spec]] = COUNTS | {
  'unlabeled_size': (
    lambda c: c.unlabeled_source == 'digits',
    checks.integer(0, data.DIGITS_COUNT, note=" (scikit-learn's digits)"),
  ),
}


def _field(c: ml_collections.ConfigDict, field: str, spec: checks.Spec) -> Any:
  value = config_path.get_value(field, c)
  problem = spec.violation(value)
  if problem is not None:
    raise _err(field, value, problem)
  return value


def validate_fields(c: ml_collections.ConfigDict) -> None:
  """:data:`FIELDS`, :data:`WHEN` and their combinations."""
  for field, spec in FIELDS.items():
    if field.split('.')[0] in c:
      _field(c, field, spec)
  for field, (counts, spec) in WHEN.items():
    if counts(c):
      _field(c, field, spec)
  if c.checkpoint_every % c.eval_every:
    why = f'must be 0 or a positive multiple of eval_every={c.eval_every}'
    raise _err('checkpoint_every', c.checkpoint_every, why)


def _validate_names(c: ml_collections.ConfigDict) -> None:
  known = default()
  for field in c:
    if field not in known:
      near = difflib.get_close_matches(field, list(known), n=1)
      hint = f' (did you mean {near[0]}?)' if near else ''
      raise ConfigError(f'config.{field} is not a field{hint}.', field=field)
  kind = c.compressor.get('kind') if 'compressor' in c else 'none'
  stray = sorted(set(c.compressor) - {'kind', 'error_feedback'}) if kind == 'none' else []
  if stray:
    why = f"compressor kind 'none' takes no setting {stray[0]!r} (set compressor.kind)."
    raise _err(f'compressor.{stray[0]}', c.compressor[stray[0]], why[:-1])


def validate_components(c: ml_collections.ConfigDict) -> None:
  """Each named component with its own settings (``Registry.bind``)."""
  data.DATASETS.bind(c.dataset, dict(c.get('dataset_args') or {}))
  models.MODELS.bind(c.model, dict(c.get('model_args') or {}))
  if data.DATASETS.meta(c.dataset).get('federated'):
    for field in ('unlabeled_size', 'validation_size', 'train_subset'):
      why = f'must be 0 for dataset={c.dataset!r} (its data is generated per client)'
      if c[field] != 0:
        raise _err(field, c[field], why)
  s = {k: v for k, v in c.schedule.items() if k not in ('kind', 'seed')}
  schedules.SCHEDULES.bind(c.schedule.kind, s, facts={'num_clients': c.num_clients})
  algorithms.ALGORITHMS.bind(c.algorithm, dict(c.hparams))
  kind = c.compressor.kind if 'compressor' in c else 'none'
  if kind != 'none':
    fields = {k: v for k, v in c.compressor.items() if k not in ('kind', 'error_feedback')}
    compression.COMPRESSORS.bind(kind, fields)


# Components named by a top-level field, their settings in a section (a sweep entry replaces both).
NAMED = {'model': models.MODELS, 'dataset': data.DATASETS}


# Sections whose kind decides which settings a run reads, with the fields a swept entry keeps.
SECTION_FIELDS = {'schedule': ('seed',), 'compressor': ('error_feedback',)}


_NOT_READ = '<not read>'


def read_value(resolved: ml_collections.ConfigDict, field: str) -> Any:
  """The value of ``field`` the ``resolved`` config's run reads (``'<not read>'``: none)."""
  if field in IGNORED and IGNORED[field](resolved):
    return _NOT_READ
  try:
    return config_path.get_value(field, resolved)
  except (KeyError, AttributeError):
    return _NOT_READ


def plain(x: Any) -> str:
  """``x`` as canonical JSON text: two values that read the same compare equal."""
  return json.dumps(record.jsonable({'v': x}), sort_keys=True)


def reads(resolved: ml_collections.ConfigDict, field: str, value: Any) -> bool:
  """Does the run of the ``resolved`` config read ``field`` as ``value``?"""
  return plain(read_value(resolved, field)) == plain(value)


def refuse_unread(
  c: ml_collections.ConfigDict, run: ml_collections.ConfigDict | None = None
) -> ml_collections.ConfigDict:
  """``c`` when each setting it gives (other than the default's) of the compressor or the
  schedule is one their kind reads, else ConfigError naming the first that is not; ``run``:
  ``c`` resolved, if it was already."""
  base = {k: plain(v) for k, v in record.flatten(default().to_dict()).items()}
  run = resolve(c) if run is None else run
  for field, value in record.flatten(c.to_dict()).items():
    section = field.split('.')[0]
    if section not in SECTION_FIELDS or value == {} or base.get(field) == plain(value):
      continue
    if not reads(run, field, value):
      kind = run[section].get('kind')
      why = f'{section}.kind={kind!r} does not read it (resolved: {read_value(run, field)!r})'
      raise _err(field, value, f'{why}; remove it, or choose the kind that takes it')
  return c


def validate(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """``c`` resolved and checked, ConfigError on its first invalid field."""
  speed = c.schedule.get('client_speed', 'none')  # set, but dropped by resolve: refused
  if c.schedule.kind in schedules.SCHEDULES and speed != 'none':
    if not schedules.registry.draws_durations(c.schedule.kind):
      drawing = tuple(k for k in schedules.SCHEDULES if schedules.registry.draws_durations(k))
      why = (
        f"must be 'none' for schedule.kind={c.schedule.kind!r} (it draws no durations); "
        f'per-client speed applies to {drawing}'
      )
      raise _err('schedule.client_speed', speed, why)
  c = resolve(c)
  _validate_names(c)
  validate_fields(c)
  validate_components(c)
  return c
