"""One declaration and one check of every setting: a value out of range or a combination that
cannot work is one line naming the field (ConfigError for a config section's component,
ArgumentError for a rule or builder called directly); the public names are the factories."""

import inspect
import math
import types

import jax
import numpy as np
import optax
import pytest

import afl_jax
from afl_jax import algorithms, checks, clients, compression, data, models, schedules, servers
from afl_jax.algorithms import RunInfo
from afl_jax.algorithms._masfl import adamasfl_theory, masfl_theory
from afl_jax.errors import ArgumentError, ConfigError
from afl_jax.pipeline import build_run
from afl_jax.pipeline import config as config_lib
from afl_jax.registry import Registry

TEST_NAME = 'registry_test_gain'
FN, U = (lambda p, x: x), np.zeros((9, 2))  # FedEcho's model and unlabeled set
ECHO = dict(apply_fn=FN, unlabeled_x=U, num_clients=3)


get = lambda name, **hp: lambda: algorithms.make(name, **hp)
call = lambda f, *args, **kwargs: lambda: f(*args, **kwargs)


# (the call, the error's class, the start of its message)
OUT_OF_RANGE = [
  (get('fedbuff', client_lr=-0.1), ConfigError, 'hparams.client_lr=-0.1 is invalid: must be > 0'),
  (get('fedbuff', client_lr=math.nan), ConfigError, 'hparams.client_lr=nan is invalid'),
  (get('fedbuff', client_lr='0.1'), ConfigError, "hparams.client_lr='0.1' is invalid"),
  (get('fedbuff', server_lr=True), ConfigError, 'hparams.server_lr=True is invalid'),
  (get('fedbuff', weighting='size'), ConfigError, "hparams.weighting='size' is invalid"),
  (get('fedbuff', bitz=4), ConfigError, "hparams.bitz=4 is invalid: algorithm 'fedbuff' takes no"),
  (get('fedasync', alpha=1.5), ConfigError, 'hparams.alpha=1.5 is invalid: must be in (0, 1]'),
  (get('fedasync', staleness='linear'), ConfigError, "hparams.staleness='linear' is invalid"),
  (get('fedfa_delta', window_size=2.5), ConfigError, 'hparams.window_size=2.5 is invalid'),
  (get('fadas', delay_adaptive=1), ConfigError, 'hparams.delay_adaptive=1 is invalid'),
  (get('multistage_fedgm', betas=(0.9, 1.0)), ConfigError, 'hparams.betas=(0.9, 1.0) is invalid'),
  (get('asynflc', bits=64), ConfigError, 'hparams.bits=64 is invalid: must be an integer in'),
  (get('adamasfl', local_steps=0), ConfigError, 'hparams.local_steps=0 is invalid'),
  (get('fedopt', tau=0.0), ConfigError, 'hparams.tau=0.0 is invalid'),
  (get('fedecho', **ECHO, alpha_max=0.1), ConfigError, 'hparams.alpha_max=0.1 is invalid'),
  (call(algorithms.fedasync, alpha=2), ConfigError, 'hparams.alpha=2 is invalid'),
  (call(compression.make, 'qsgd', bits=1), ConfigError, 'compressor.bits=1 is invalid'),
  (call(compression.make, 'top_k', frac=0.1), ConfigError, 'compressor.frac=0.1 is invalid'),
  (call(compression.top_k, math.nan), ConfigError, 'compressor.fraction=nan is invalid'),
  (call(schedules.durations.make, 'gamma'), ConfigError, "schedule.durations='gamma' is invalid"),
  (call(schedules.durations.make, 'uniform', low=3, high=1), ConfigError, 'schedule.durations_'),
  (call(servers.fedgm, beta=1.0), ArgumentError, 'beta=1.0 is invalid: must be in [0, 1)'),
  (call(servers.fedasync, staleness='linear'), ArgumentError, "staleness='linear' is invalid"),
  (call(clients.local_sgd, 0.0), ArgumentError, 'client_lr=0.0 is invalid'),
  (call(schedules.fedbuff, 100, 20, 30, 5), ArgumentError, 'buffer_size=30 is invalid: must be'),
  (call(masfl_theory, 10, 2, 6000, 0.0, 4), ArgumentError, 'smoothness=0.0 is invalid'),
]


@pytest.mark.parametrize('build,cls,start', OUT_OF_RANGE, ids=lambda v: getattr(v, '__name__', ''))
def test_a_value_out_of_range_is_refused_in_one_line_naming_it(build, cls, start):
  with pytest.raises(cls) as err:
    build()
  assert str(err.value).startswith(start) and '\n' not in str(err.value), str(err.value)


ALG2 = {'convention': 'alg2'}
EXPONENTIAL = {'durations': 'exponential'}
# A combination of values (and a run fact) no single range states: (call, what the message names)
COMBINATIONS = [
  (get('fedopt', bias_correction=True), "convention='alg2'"),
  (get('fedopt', **ALG2, server_optimizer='amsgrad'), "'amsgrad' is optax's only"),
  (get('fedopt', **ALG2, server_optimizer='adagrad', bias_correction=True), 'FedAdagrad'),
  (call(servers.fedfa, mode='param', server_lr=0.5), 'server_lr=0.5 is invalid: applies to mode='),
  (get('asynflc', compressor='sign', fraction=0.1), "compressor 'sign' takes no ['fraction']"),
  (get('fedecho', **ECHO, distill_batch=10), 'distill_batch=10 is invalid: exceeds the 9 unla'),
  (get('fedecho', apply_fn=FN), "unlabeled_x is a run fact algorithm 'fedecho' needs"),
  (get('fedecho', **ECHO | {'unlabeled_x': U[:0]}), 'unlabeled_x=float64[0, 2] is invalid: must'),
  (call(servers.multistage_fedgm, [2, 2], [1.0], [0, 0], [0, 0]), 'but stage_lengths has 2'),
  (call(schedules.fedbuff, 10, 6, 6, 5), 'num_clients=10 is invalid: must be >= concurrency + buf'),
  (call(schedules.random_staleness, 10, 2, 5, window=3, max_staleness=2), 'not both'),
  (  # the string form: the mapping example is the named distribution's, not uniform's
    call(schedules.registry.DURATIONS.bind, 'draw', EXPONENTIAL | {'durations_params': 'mean=3'}),
    "parameters ['mean'] of distribution 'exponential', e.g. {'mean': 1.0}",
  ),
  (call(masfl_theory, 10, 12, 600, 2.5, 4), 'Theorem 3.1'),
  (call(adamasfl_theory, 10, 12, 100), 'num_rounds=100 is invalid: must be >='),
  (get('fedbuf'), "unknown algorithm name='fedbuf'; valid: ['adamasfl',"),
]


@pytest.mark.parametrize('build,named', COMBINATIONS)
def test_a_combination_that_cannot_work_is_one_line(build, named):
  with pytest.raises(ValueError) as err:
    build()
  assert named in str(err.value) and '\n' not in str(err.value), str(err.value)


@pytest.mark.parametrize(
  'name,hp',
  [
    ('fedbuff', dict(client_lr=0.1, server_lr=1)),  # an int where a float is the default
    ('fedbuff', dict(client_lr=np.float32(0.05), weighting='examples')),
    ('fedbuff', dict(client_lr=optax.linear_schedule(0.1, 0.01, 10))),  # schedules pass
    ('fedasync', dict(alpha=1.0, staleness='hinge', a=0.0, b=0.0)),
    ('fedecho', dict(**ECHO, clip_norm=math.inf, alpha_min=0.5, alpha_max=0.5)),  # inf: no clip
    ('multistage_fedgm', dict(betas=np.array([0.9, 0.0, 0.5]))),
    ('masfl', dict(client_lr=None, beta=1.0)),  # None where the default is None
  ],
)
def test_values_inside_the_ranges_build(name, hp):
  assert algorithms.make(name, **hp).name == name


def test_every_hyperparameter_has_a_range_its_default_meets():
  """Unchecked only where the default is None or a sequence (its own spec then checks it)."""
  for name in algorithms.names():
    defaults = algorithms.settings(name)
    for k, spec in algorithms.ALGORITHMS.specs(name).items():
      if spec is None:
        assert defaults[k] is None or isinstance(defaults[k], tuple), (name, k)
      else:
        assert algorithms.ALGORITHMS.violation(name, k, defaults[k]) is None, (name, k)


@pytest.mark.parametrize(
  'package', [algorithms, servers, clients, compression, schedules, models, data]
)
def test_every_kind_is_made_listed_and_read_with_the_same_verbs(package):
  """``make``, ``names``, ``settings`` (and ``register``) of each kind's registry; its public
  names are the registered factories (a module never shadows one)."""
  registry = package.make.__self__
  assert all(getattr(package, v).__self__ is registry for v in ('names', 'settings', 'register'))
  if package not in (models, data):
    for name in package.__all__:
      assert not isinstance(getattr(package, name), types.ModuleType), name
    registry = {schedules: schedules.BUILDERS}.get(package, registry)
    for name in registry.names():
      public = getattr(package, name)
      assert public.__name__ == name and public.__registered__ == (registry, name)


def test_get_fills_the_declared_context_from_a_run_info_unless_given():
  info = RunInfo(num_clients=7)
  assert algorithms.make('asynfl', facts=info, client_lr=0.1).name == 'asynfl'
  with pytest.raises(ConfigError, match='hparams.num_clients=0 is invalid'):
    algorithms.make('asynfl', facts=info, num_clients=0)  # given by hand: wins
  for name in algorithms.names():  # a factory taking a RunInfo field declares it
    params = inspect.signature(algorithms.ALGORITHMS.factory(name)).parameters
    takes = [f for f in algorithms.CONTEXT_FIELDS if f in params]
    assert sorted(takes) == sorted(algorithms.ALGORITHMS.context(name)), name


@pytest.fixture
def gain_algorithm():
  """A test algorithm whose hyperparameter ``gain`` is declared in [0, 1] at registration."""

  @algorithms.register(TEST_NAME, gain=checks.real(0.0, 1.0))
  def factory(client_lr=0.1, gain=0.5, weighting='uniform'):
    alg = algorithms.make('fedbuff', client_lr=client_lr * gain, weighting=weighting)
    return alg._replace(name=TEST_NAME)

  yield TEST_NAME
  algorithms.ALGORITHMS.unregister(TEST_NAME)


def test_a_range_declared_at_registration_checks_get_sweep_and_a_config(gain_algorithm, quad):
  with pytest.raises(ConfigError, match=r'^hparams.gain=1.5 is invalid: must be in \[0, 1\]'):
    algorithms.make(gain_algorithm, gain=1.5)
  problem, schedule, params0 = quad
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ConfigError, match=r'^replica 1: hparams.gain=2.0 is invalid: must be in'):
    afl_jax.sweep(gain_algorithm, problem, schedule, params0, keys, gain=[0.5, 2.0])
  with pytest.raises(ConfigError, match=r'^replica 1: hparams.client_lr=-1.0 is invalid'):
    afl_jax.sweep('fedbuff', problem, schedule, params0, keys, client_lr=[0.1, -1.0])
  c = config_lib.default()
  c.dataset, c.num_clients, c.schedule.concurrency, c.schedule.buffer_size = 'digits', 12, 4, 2
  c.num_rounds, c.eval_every, c.batch_size = 10, 10, 16
  config_lib.set_algorithm(c, gain_algorithm, gain=1.5)
  with pytest.raises(
    ConfigError, match=r'^config.hparams.gain=1.5 is invalid: must be in \[0, 1\]\.$'
  ):
    build_run(c)  # validated before any data is loaded
  c.hparams = {'client_lr': '0.1', 'gain': 0.5}
  with pytest.raises(ConfigError, match=r"^config.hparams.client_lr='0.1' is invalid: must be a"):
    config_lib.validate(c)
  config_lib.set_algorithm(c, gain_algorithm, gain=0.25)
  assert build_run(c).algorithm.name == gain_algorithm


def test_registering_a_name_again_needs_replace_and_ranges_name_arguments(gain_algorithm):
  with pytest.raises(ValueError, match='registered twice.*replace=True'):
    algorithms.register(gain_algorithm)(lambda client_lr=0.1: None)

  @algorithms.register(gain_algorithm, gain=checks.real(0.0, 2.0), replace=True)
  def again(client_lr=0.1, gain=1.0):
    return algorithms.make('fedbuff', client_lr=client_lr * gain)

  assert algorithms.make(gain_algorithm, gain=1.5).name == 'fedbuff'  # the new range
  with pytest.raises(ValueError, match=r"ranges \['gian'\] are not arguments"):
    algorithms.register('never_registered', gian=checks.POSITIVE)(lambda gain=0.5: None)
  with pytest.raises(TypeError, match='must be a checks.Spec'):
    algorithms.register('never_registered', gain=(0, 1))(lambda gain=0.5: None)
  with pytest.raises(ValueError, match='are not run facts'):
    algorithms.register('never_registered', context=('num_widgets',))(lambda num_widgets=1: None)
  assert 'never_registered' not in algorithms.names()
  r = Registry('widget')
  r.register('a', lambda: 1, colour='red')
  with pytest.raises(ValueError, match=r"unknown widget name='c'; valid: \['a'\]"):
    r.make('c')
  r.register('a', lambda: 3, replace=True, colour='blue')
  assert r.make('a') == 3 and r.meta('a') == {'colour': 'blue'} and len(r) == 1


@pytest.mark.parametrize(
  'registry,setting',
  [(algorithms.ALGORITHMS, 'name'), (algorithms.ALGORITHMS, 'facts')]
  + [(algorithms.ALGORITHMS, k) for k in ('replace', 'context', 'uses', 'fixed', 'rules')]
  + [(schedules.SCHEDULES, 'kind'), (compression.COMPRESSORS, 'kind')],
)
def test_a_setting_named_like_an_argument_of_register_is_refused_at_the_registration(
  registry, setting
):
  namespace = {}
  exec(f'def factory(ctx=None, client_lr=0.1, {setting}=1):\n  return None', namespace)
  with pytest.raises(ValueError) as err:
    registry.register('never_registered', namespace['factory'])
  reserved = f'setting {setting!r} is reserved; rename it.'
  assert str(err.value) == f"{registry.kind} 'never_registered': {reserved}"
  assert 'never_registered' not in registry.names()
