"""Experiment configuration: the shared default and validation before any compute.

Every field can be overridden on the command line (``--config.num_rounds=300``).
:func:`validate` checks a whole config and raises :class:`ConfigError` naming the
field, the value and the allowed range, before any data is loaded or compiled.
"""

from __future__ import annotations

import ml_collections

from afl_jax import algorithms
from afl_jax.errors import ConfigError
from afl_jax.schedules.durations import CLIENT_SPEEDS, Durations
from afl_jax.schedules.durations import make as make_duration_model

DATASETS = ('fmnist', 'digits', 'synthetic')
PARTITIONS = ('iid', 'dirichlet', 'shards')
MODELS = ('logreg', 'mlp', 'cnn', 'resnet18')
SCHEDULES = (
  'synchronous',
  'fedbuff',
  'fully_async',
  'random_staleness',
  'waiting_windows',
  'fedecho_large',
  'fedecho_mild',
)  # fedecho_*: FedEcho's Table 1 on FedBuff's clock
DTYPES = ('float32', 'float64')
# The schedule kinds that draw job durations from ``schedule.durations``.
DURATION_SCHEDULES = ('synchronous', 'fedbuff', 'fully_async', 'waiting_windows')


def default() -> ml_collections.ConfigDict:
  """The shared default: FedBuff on non-IID Fashion-MNIST with the MLP, 2-core sized."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.algorithm = 'fedbuff'
  c.hparams = ml_collections.ConfigDict({'client_lr': 0.05, 'server_lr': 1.0})
  # Data.
  c.dataset = 'fmnist'
  c.data_dir = ''  # '' = $AFL_JAX_DATA, then /usr/share/datasets/fashion-mnist
  c.download = False
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.5
  c.shards_per_client = 2
  c.num_clients = 100
  c.unlabeled_size = 0  # training samples held out for the server (FedEcho)
  c.train_subset = 0  # use only this many training samples (0 = all), for quick runs
  # Model and local training.
  c.model = 'mlp'
  c.batch_size = 32
  c.local_steps = 10  # used when local_epochs == 0
  c.local_epochs = 0  # > 0: K_i = local_epochs * ceil(n_i / batch_size), differs per client
  c.dtype = 'float32'
  c.client_block_size = 0  # > 0: train a step's clients in blocks of this size (memory)
  # Delay model / schedule.
  c.schedule = ml_collections.ConfigDict()
  c.schedule.kind = 'fedbuff'
  c.schedule.concurrency = 20
  c.schedule.buffer_size = 10
  c.schedule.clients_per_step = 10
  c.schedule.window = 5  # random_staleness: last m versions
  c.schedule.local_steps_multipliers = ''  # e.g. '1,2,3,4,5,6' (random_staleness)
  c.schedule.wait_seconds = 0.0  # waiting_windows: seconds per round (0 = synchronous)
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
  return c


def _err(field: str, value, allowed: str) -> ConfigError:
  return ConfigError(f'config.{field}={value!r} is invalid: {allowed}.')


def _check(cond: bool, field: str, value, allowed: str) -> None:
  if not cond:
    raise _err(field, value, allowed)


def validate(c: ml_collections.ConfigDict, num_samples: int | None = None) -> None:
  """Raise ConfigError on the first invalid field.

  Args:
    c: the config.
    num_samples: number of training samples once known (checks num_clients <= it).
  """
  _check(
    c.algorithm in algorithms.names(),
    'algorithm',
    c.algorithm,
    f'must be one of {algorithms.names()}',
  )
  valid_hp = algorithms.hyperparameters(c.algorithm)
  for k, v in c.hparams.items():
    _check(k in valid_hp, f'hparams.{k}', v, f'{c.algorithm} takes {sorted(valid_hp)}')
    if k.endswith('_lr') or k in ('lr', 'learning_rate'):
      _check(isinstance(v, (int, float)) and v > 0, f'hparams.{k}', v, 'must be > 0')
  _check(c.dataset in DATASETS, 'dataset', c.dataset, f'must be one of {DATASETS}')
  _check(c.partition in PARTITIONS, 'partition', c.partition, f'must be one of {PARTITIONS}')
  _check(c.dirichlet_alpha > 0, 'dirichlet_alpha', c.dirichlet_alpha, 'must be > 0')
  _check(c.shards_per_client >= 1, 'shards_per_client', c.shards_per_client, 'must be >= 1')
  _check(
    isinstance(c.num_clients, int) and c.num_clients >= 1,
    'num_clients',
    c.num_clients,
    'must be an integer >= 1',
  )
  if num_samples is not None:
    _check(
      c.num_clients <= num_samples,
      'num_clients',
      c.num_clients,
      f'must be <= the number of training samples ({num_samples})',
    )
  _check(c.unlabeled_size >= 0, 'unlabeled_size', c.unlabeled_size, 'must be >= 0')
  _check(c.train_subset >= 0, 'train_subset', c.train_subset, 'must be >= 0 (0 = all)')
  _check(c.model in MODELS, 'model', c.model, f'must be one of {MODELS}')
  _check(c.batch_size >= 1, 'batch_size', c.batch_size, 'must be >= 1')
  _check(c.local_epochs >= 0, 'local_epochs', c.local_epochs, 'must be >= 0 (0 = use steps)')
  if c.local_epochs == 0:
    _check(c.local_steps >= 1, 'local_steps', c.local_steps, 'must be >= 1')
  _check(c.dtype in DTYPES, 'dtype', c.dtype, f'must be one of {DTYPES}')
  _check(
    c.client_block_size >= 0,
    'client_block_size',
    c.client_block_size,
    'must be >= 0 (0 = all clients of a step at once)',
  )
  s = c.schedule
  _check(s.kind in SCHEDULES, 'schedule.kind', s.kind, f'must be one of {SCHEDULES}')
  if s.kind in ('fedbuff', 'fully_async', 'fedecho_large', 'fedecho_mild'):
    _check(
      1 <= s.concurrency <= c.num_clients,
      'schedule.concurrency',
      s.concurrency,
      f'must be in [1, num_clients={c.num_clients}]',
    )
  if s.kind in ('fedbuff', 'fedecho_large', 'fedecho_mild'):
    _check(
      1 <= s.buffer_size <= s.concurrency,
      'schedule.buffer_size',
      s.buffer_size,
      f'must be in [1, concurrency={s.concurrency}]',
    )
    _check(
      c.num_clients >= s.concurrency + s.buffer_size - 1,
      'num_clients',
      c.num_clients,
      f'must be >= concurrency + buffer_size - 1 = {s.concurrency + s.buffer_size - 1}',
    )
  if s.kind in ('synchronous', 'random_staleness'):
    _check(
      1 <= s.clients_per_step <= c.num_clients,
      'schedule.clients_per_step',
      s.clients_per_step,
      f'must be in [1, num_clients={c.num_clients}]',
    )
  if s.kind == 'random_staleness':
    _check(s.window >= 1, 'schedule.window', s.window, 'must be >= 1')
  if s.kind == 'waiting_windows':
    _check(
      s.wait_seconds >= 0,
      'schedule.wait_seconds',
      s.wait_seconds,
      'must be >= 0 (0 = synchronous limit)',
    )
  _check(
    s.client_speed in CLIENT_SPEEDS,
    'schedule.client_speed',
    s.client_speed,
    f'must be one of {CLIENT_SPEEDS}',
  )
  if s.client_speed != 'none':
    _check(
      s.kind in DURATION_SCHEDULES,
      'schedule.client_speed',
      s.client_speed,
      f"must be 'none' for schedule.kind={s.kind!r} (it draws no durations); "
      f'per-client speed applies to {DURATION_SCHEDULES}',
    )
  if s.client_speed == 'lognormal':
    _check(
      s.client_speed_sigma > 0, 'schedule.client_speed_sigma', s.client_speed_sigma, 'must be > 0'
    )
  try:
    make_durations(s.durations, s.durations_params)
  except ValueError as e:
    raise ConfigError(
      f'config.schedule.durations={s.durations!r} with durations_params='
      f'{s.durations_params!r} is invalid: {e}'
    ) from e
  _check(
    isinstance(c.num_rounds, int) and c.num_rounds >= 1,
    'num_rounds',
    c.num_rounds,
    'must be an integer >= 1',
  )
  _check(1 <= c.eval_every, 'eval_every', c.eval_every, 'must be >= 1')
  _check(c.eval_train_samples >= 1, 'eval_train_samples', c.eval_train_samples, 'must be >= 1')
  _check(
    c.checkpoint_every >= 0 and (c.checkpoint_every % c.eval_every == 0),
    'checkpoint_every',
    c.checkpoint_every,
    f'must be 0 or a positive multiple of eval_every={c.eval_every}',
  )
  _check(c.stop_after_steps >= 0, 'stop_after_steps', c.stop_after_steps, 'must be >= 0')
  _check(0.0 <= c.target_accuracy <= 1.0, 'target_accuracy', c.target_accuracy, 'must be in [0, 1]')


def parse_params(text: str) -> dict[str, float]:
  """'low=0,high=20' -> {'low': 0.0, 'high': 20.0}."""
  out = {}
  for item in filter(None, (p.strip() for p in text.split(','))):
    if '=' not in item:
      raise ValueError(f'expected name=value, got {item!r}')
    k, v = item.split('=', 1)
    out[k.strip()] = float(v)
  return out


def make_durations(kind: str, params: str, speed=None) -> Durations:
  return make_duration_model(kind, speed=speed, **parse_params(params))
