"""Experiment configuration: the shared default and one validator per section.

Every field can be overridden on the command line (``--config.num_rounds=300``).
:func:`validate` checks a whole config, section by section (run, data, model,
schedule, algorithm + hyperparameters, compressor, sweep), and raises
:class:`~afl_jax.errors.ConfigError` naming the field, the value and the allowed
range, before any data is loaded or compiled. Checks that need the loaded data
(``num_clients`` <= the samples, partitions that cannot give every client data)
run in :func:`afl_jax.pipeline.build.build_run`, where the data is known.

``config.hparams`` holds the algorithm's hyperparameters; :func:`resolve` fills in
every hyperparameter the algorithm takes with its default, so that any of them can
be set on the command line (``--config.hparams.bits=4``), and :func:`set_algorithm`
is the helper config files use.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import ml_collections
from ml_collections.config_flags import config_path

from afl_jax import algorithms, compression, data, models, schedules
from afl_jax.core import checks
from afl_jax.errors import ConfigError
from afl_jax.schedules.durations import KINDS as DURATION_KINDS

DTYPES = ('float32', 'float64')
COMPUTE_DTYPES = ('dtype', 'bfloat16', 'float16', 'float32')  # 'dtype': no cast
COMPRESSOR_KINDS = ('none',) + tuple(compression.NAMES)
SEED_MAX = 2**32 - 1  # NumPy and JAX seeds are uint32


def default() -> ml_collections.ConfigDict:
  """The shared default: FedBuff on non-IID Fashion-MNIST with the MLP, 2-core sized."""
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
  c.schedule.durations_params = 'low=0,high=20'  # the distribution's parameters
  # Per-client factor multiplying every duration draw (larger = slower):
  # none | local_steps (K_i / mean K: more local work takes longer) |
  # lognormal (exp(sigma * z) per client, sigma = client_speed_sigma, schedule seed).
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
  """:func:`default` with the hyperparameters ``hparams`` and the dotted ``fields``
  (``'algorithm'``, ``'schedule.kind'``, ...): how a config file's table entry becomes a
  config (``configs/fmnist.py``, ``configs/paper_cifar10.py``)."""
  c = default()
  c.hparams = copy.deepcopy(dict(hparams))
  for field, value in fields.items():
    config_path.set_value(field, c, copy.deepcopy(value))
  return c


def entry(table: Mapping[str, Any], name: str, file: str) -> Any:
  """``table[name]``, the entry ``--config=FILE:NAME`` names in a config file's table.

  Raises:
    ConfigError: ``name`` is empty or not in ``table`` (the message lists the valid names).
  """
  if name in table:
    return table[name]
  what = f'has no config {name!r}' if name else 'needs a config name'
  raise ConfigError(f'{file} {what}: give --config={file}:NAME, NAME one of {", ".join(table)}')


def exec_file(file: str) -> ModuleType:
  """The Python file ``file`` run as a fresh module (not entered in ``sys.modules``)."""
  spec = importlib.util.spec_from_file_location('afl_jax_config_file', file)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def load_file(spec: str) -> ml_collections.ConfigDict:
  """The config of ``FILE`` or ``FILE:NAME`` (``get_config()``, ``get_config(NAME)``), as
  ``--config=FILE[:NAME]`` reads it."""
  file, _, name = spec.partition(':')
  module = exec_file(file)
  return module.get_config(name) if name else module.get_config()


def import_beside(path: str, name: str) -> ModuleType:
  """Import module ``name`` from the directory of the file ``path`` (a config's ``__file__``).

  Config files are loaded by path, not as a package; this is how code imports one
  (``fmnist = import_beside(path_in_configs, 'fmnist')``, the declarations of
  ``configs/repro/``).
  """
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


# ---- hyperparameters --------------------------------------------------------------------
def default_hparams(algorithm: str) -> dict[str, Any]:
  """Every hyperparameter ``algorithm`` takes with its default (required ones left out)."""
  return {
    k: v
    for k, v in algorithms.hyperparameters(algorithm).items()
    if v is not inspect.Parameter.empty
  }


def set_algorithm(c: ml_collections.ConfigDict, name: str, **hparams: Any) -> None:
  """Set ``c.algorithm = name`` and ``c.hparams`` = its full hyperparameter set.

  Defaults come from the algorithm's factory, ``hparams`` override them; every name
  is then settable on the command line (``--config.hparams.bits=4``).
  """
  c.algorithm = name
  full = default_hparams(name)
  unknown = sorted(set(hparams) - set(algorithms.hyperparameters(name)))
  if unknown:
    raise _err(
      f'hparams.{unknown[0]}',
      hparams[unknown[0]],
      f'{name} takes {sorted(algorithms.hyperparameters(name))}',
    )
  full.update(hparams)
  c.hparams = ml_collections.ConfigDict(full)


def resolve(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A copy of ``c`` whose ``hparams`` lists every hyperparameter of ``c.algorithm``.

  Values given in ``c.hparams`` are kept (unknown names are left for
  :func:`validate` to reject); an unknown algorithm is left as it is.
  """
  out = ml_collections.ConfigDict(c.to_dict())
  if isinstance(c.algorithm, str) and c.algorithm in algorithms.names():
    full = default_hparams(c.algorithm)
    full.update(dict(c.hparams))
    out.hparams = ml_collections.ConfigDict(full)
  return out


def parse_value(text: str, current: Any) -> Any:
  """A command-line string as the type of ``current`` (its default); None: best guess."""
  low = text.strip().lower()
  if isinstance(current, bool) or (current is None and low in ('true', 'false')):
    if low not in ('true', 'false', '1', '0'):
      raise ValueError(f'must be a boolean (true/false); got {text!r}')
    return low in ('true', '1')
  if isinstance(current, int):
    try:
      return int(text)
    except ValueError:
      raise ValueError(f'must be an integer; got {text!r}') from None
  if isinstance(current, float):
    try:
      return float(text)
    except ValueError:
      raise ValueError(f'must be a number; got {text!r}') from None
  if isinstance(current, (tuple, list)):
    try:
      value = ast.literal_eval(text if text.strip().startswith(('(', '[')) else f'({text},)')
    except (ValueError, SyntaxError):
      raise ValueError(f'must be a tuple of values like (1, 2); got {text!r}') from None
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)
  if current is None:
    for cast in (int, float):
      try:
        return cast(text)
      except ValueError:
        pass
    return None if low == 'none' else text
  return text


def override_hparam(c: ml_collections.ConfigDict, name: str, text: str) -> None:
  """Apply ``--config.hparams.NAME=TEXT`` to a resolved config (one-line errors)."""
  valid = sorted(algorithms.hyperparameters(c.algorithm))
  if name not in valid:
    raise _err(
      f'hparams.{name}', text, f'{c.algorithm} takes no hyperparameter {name!r}; valid: {valid}'
    )
  try:
    value = parse_value(text, c.hparams.get(name))
  except ValueError as e:
    raise _err(f'hparams.{name}', text, str(e)) from None
  with c.hparams.unlocked():
    c.hparams[name] = value


# ---- field checks -----------------------------------------------------------------------
def _err(field: str, value: Any, allowed: str) -> ConfigError:
  return ConfigError.invalid(field, value, f'{allowed}.')


def _check(cond: bool, field: str, value: Any, allowed: str) -> None:
  if not cond:
    raise _err(field, value, allowed)


def _int(c, field: str, low: int, high: int | None = None, note: str = '') -> int:
  v = config_path.get_value(field, c)
  ok = not isinstance(v, bool) and isinstance(v, int) and v >= low and (high is None or v <= high)
  rng = f'an integer >= {low}' if high is None else f'an integer in [{low}, {high}]'
  _check(ok, field, v, f'must be {rng}{note}')
  return v


def _float(c, field: str, low: float, high: float = math.inf, *, low_open=False) -> float:
  v = config_path.get_value(field, c)
  try:
    x = checks.number(field, v)
  except ValueError:
    raise _err(field, v, 'must be a finite number (not a boolean)') from None
  ok = (x > low if low_open else x >= low) and x <= high
  if high == math.inf:
    rng = f'> {low:g}' if low_open else f'>= {low:g}'
  else:
    rng = f'in {"(" if low_open else "["}{low:g}, {high:g}]'
  _check(ok, field, v, f'must be {rng}')
  return x


def _bool(c, field: str) -> bool:
  v = config_path.get_value(field, c)
  _check(isinstance(v, bool), field, v, 'must be a boolean (True or False)')
  return v


def _choice(c, field: str, allowed) -> Any:
  v = config_path.get_value(field, c)
  allowed = tuple(allowed)
  _check(isinstance(v, str) and v in allowed, field, v, f'must be one of {allowed}')
  return v


# ---- one validator per section ---------------------------------------------------------
def validate_run(c: ml_collections.ConfigDict) -> None:
  """seed, run length, evaluation, checkpoints, dtype, engine options."""
  _int(c, 'seed', 0, SEED_MAX)
  _int(c, 'num_rounds', 1)
  _int(c, 'eval_every', 1)
  _int(c, 'eval_train_samples', 1)
  every = _int(c, 'checkpoint_every', 0)
  _check(
    every % c.eval_every == 0,
    'checkpoint_every',
    every,
    f'must be 0 or a positive multiple of eval_every={c.eval_every}',
  )
  _int(c, 'stop_after_steps', 0)
  _float(c, 'target_accuracy', 0.0, 1.0)
  _choice(c, 'dtype', DTYPES)
  blocks = _int(c, 'client_block_size', 0, note=' (0 = all clients of a step at once)')
  _int(
    c,
    'local_step_buckets',
    -1,
    note=' (-1 = chosen from the local steps, 0 = every client padded to the largest K, '
    'B >= 1 = B blocks of clients sorted by K)',
  )
  _check(
    not (blocks and c.local_step_buckets >= 1),
    'local_step_buckets',
    c.local_step_buckets,
    f'must be -1 or 0 with client_block_size={blocks} (the blocks are those of '
    'client_block_size; -1 groups them by K, 0 does not)',
  )
  _choice(c, 'compute_dtype', COMPUTE_DTYPES)


def validate_data(c: ml_collections.ConfigDict) -> None:
  """dataset, partition and its parameters, client count, held-out sets."""
  _choice(c, 'dataset', data.DATASETS.names())
  _check(isinstance(c.data_dir, str), 'data_dir', c.data_dir, 'must be a path (a string)')
  _bool(c, 'download')
  _choice(c, 'partition', data.PARTITIONS)
  if c.partition == 'dirichlet':
    _float(c, 'dirichlet_alpha', 0.0, low_open=True)
  if c.partition == 'shards':
    _int(c, 'shards_per_client', 1)
  _int(c, 'num_clients', 1)
  _int(c, 'unlabeled_size', 0)
  source = _choice(c, 'unlabeled_source', data.UNLABELED_SOURCES)
  if source == 'digits':
    _int(c, 'unlabeled_size', 0, data.DIGITS_COUNT, note=" (scikit-learn's digits)")
  _int(c, 'validation_size', 0)
  _int(c, 'train_subset', 0, note=' (0 = all)')
  if data.DATASETS.meta(c.dataset).get('federated'):
    for field in ('unlabeled_size', 'validation_size', 'train_subset'):
      why = f'must be 0 for dataset={c.dataset!r} (its data is generated per client)'
      _check(c[field] == 0, field, c[field], why)


def validate_model(c: ml_collections.ConfigDict) -> None:
  """model and local training."""
  _choice(c, 'model', models.MODELS.names())
  _int(c, 'batch_size', 1)
  _int(c, 'local_epochs', 0, note=' (0 = use local_steps)')
  if c.local_epochs == 0:
    _int(c, 'local_steps', 1)


def validate_schedule(c: ml_collections.ConfigDict) -> None:
  """The delay model (``config.schedule``): the fields its registry entry declares."""
  s = c.schedule
  kind = _choice(c, 'schedule.kind', schedules.SCHEDULES.names())
  n = c.num_clients
  for name in schedules.registry.params(kind):
    field, param = f'schedule.{name}', schedules.registry.PARAMS[name]
    if param.kind == 'integer':
      high, note = param.high(s, n) if param.high else (None, '')
      _int(c, field, param.low, high, note=note)
    elif param.kind == 'real':
      _float(c, field, param.low, low_open=param.low_open)
    elif param.kind == 'boolean':
      _bool(c, field)
    else:  # 'multipliers'
      try:
        mult = schedules.registry.parse_multipliers(s[name])
      except (ValueError, AttributeError):
        mult = [0]
      _check(
        mult is None or min(mult) >= 1,
        field,
        s[name],
        "must be '' or comma-separated integers >= 1",
      )
  if 'min_clients' in schedules.SCHEDULES.meta(kind):
    what, least = schedules.SCHEDULES.meta(kind)['min_clients']
    _check(n >= least(s), 'num_clients', n, f'must be >= {what} = {least(s)}')
  _int(c, 'schedule.seed', -1, SEED_MAX, note=' (-1 = derive from config.seed)')
  speed = _choice(c, 'schedule.client_speed', schedules.CLIENT_SPEEDS)
  draws = schedules.SCHEDULES.meta(kind)['draws_durations']
  if speed != 'none':
    drawing = tuple(
      k for k in schedules.SCHEDULES if schedules.SCHEDULES.meta(k)['draws_durations']
    )
    _check(
      draws,
      'schedule.client_speed',
      speed,
      f"must be 'none' for schedule.kind={kind!r} (it draws no durations); "
      f'per-client speed applies to {drawing}',
    )
  if speed == 'lognormal':
    _float(c, 'schedule.client_speed_sigma', 0.0, low_open=True)
  if draws:
    _choice(c, 'schedule.durations', DURATION_KINDS)
    try:
      params = schedules.parse_params(s.durations_params)
      if not all(math.isfinite(v) for v in params.values()):
        raise ValueError('parameters must be finite numbers')
      schedules.make_durations(s.durations, s.durations_params)
    except (ValueError, AttributeError) as e:
      raise _err(
        'schedule.durations_params',
        s.durations_params,
        f'{str(e).rstrip(".")} (schedule.durations={s.durations!r})',
      ) from None


def validate_algorithm_name(c: ml_collections.ConfigDict) -> str:
  """``config.algorithm`` names a registered algorithm."""
  return _choice(c, 'algorithm', algorithms.names())


def validate_algorithm(c: ml_collections.ConfigDict) -> None:
  """algorithm name and every value of ``config.hparams``.

  Each value is checked against the spec its algorithm declared at registration
  (type, finiteness, range: :func:`afl_jax.algorithms.violation`, the same check
  ``afl_jax.algorithms.get`` and ``afl_jax.sweep`` make). Combinations of values are
  checked by the algorithm's factory, called by :func:`afl_jax.pipeline.build.build_run`
  before any compute.
  """
  name = validate_algorithm_name(c)
  valid = algorithms.hyperparameters(name)
  for k, v in c.hparams.items():
    _check(k in valid, f'hparams.{k}', v, f'{name} takes {sorted(valid)}')
    problem = algorithms.violation(name, k, v)
    if problem is not None:
      raise _err(f'hparams.{k}', v, problem)


def validate_compressor(c: ml_collections.ConfigDict) -> None:
  """``config.compressor``: kind and the parameters that kind takes."""
  if 'compressor' not in c:
    return
  kind = _choice(c, 'compressor.kind', COMPRESSOR_KINDS)
  _bool(c, 'compressor.error_feedback')
  if kind == 'none':
    return
  for name in compression.takes(kind):  # what each accepts: compression.PARAMS
    problem = compression.PARAMS[name].violation(c.compressor[name])
    if problem is not None:
      raise _err(f'compressor.{name}', c.compressor[name], problem)


def sweep_axes(sweep: Any, prefix: str = '') -> dict[str, list]:
  """Nested ``config.sweep`` -> ``{'hparams.client_lr': [...], 'seed': [...]}``."""
  out: dict[str, list] = {}
  for k, v in sweep.items():
    name = f'{prefix}{k}'
    if isinstance(v, Mapping | ml_collections.ConfigDict):
      out.update(sweep_axes(v, name + '.'))
    else:
      out[name] = list(v) if isinstance(v, list | tuple) else [v]
  return out


def validate_sweep(c: ml_collections.ConfigDict) -> None:
  """``config.sweep``: every field exists and has a non-empty list of values.

  Each swept hyperparameter value is checked as a single run's would be
  (:func:`afl_jax.algorithms.violation`), before any grid point is built.
  """
  if not c.get('sweep'):
    return
  hparams = (
    set(algorithms.hyperparameters(c.algorithm)) if c.algorithm in algorithms.names() else set()
  )
  for field, values in sweep_axes(c.sweep).items():
    if not values:
      raise ConfigError.invalid(f'sweep.{field}', [], 'give at least one value.')
    if field.startswith('hparams.'):
      name = field[len('hparams.') :]
      if hparams and name not in hparams:
        raise ConfigError(
          f'config.sweep.{field} is invalid: {c.algorithm!r} has no hyperparameter '
          f'{name!r}; valid: {sorted(hparams)}.',
          field=f'sweep.{field}',
        )
      for value in values if hparams else ():  # each value as a single run's would be
        problem = algorithms.violation(c.algorithm, name, value)
        _check(problem is None, f'sweep.{field}', list(values), f'the value {value!r} {problem}')
      continue
    try:
      config_path.get_value(field, c)
    except (KeyError, AttributeError):
      raise ConfigError(
        f'config.sweep.{field} is invalid: config has no field {field!r}.', field=f'sweep.{field}'
      ) from None
    if field == 'sweep' or field.startswith('sweep.'):
      raise ConfigError('config.sweep cannot sweep itself.', field='sweep')


SECTIONS = (
  validate_run,
  validate_data,
  validate_model,
  validate_schedule,
  validate_algorithm,
  validate_compressor,
  validate_sweep,
)


def validate(c: ml_collections.ConfigDict) -> None:
  """Raise ConfigError on the first invalid field (every section, in order)."""
  for section in SECTIONS:
    section(c)
