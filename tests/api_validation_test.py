"""The Python API checks what the command line checks, with one error that says what to pass.

One spec per hyperparameter, declared at registration, serves ``algorithms.get``,
``afl_jax.sweep`` (every replica) and a config (``pipeline.build_run``); a params tree
that does not fit the problem, a schedule for another N and a sweep without keys
are each one :class:`~afl_jax.errors.UserError` naming what to pass. What ``simulate``
and ``sweep`` return is what ``Result``'s docstring says: its metric keys and values,
and ``params_history`` (always from ``simulate``; from ``sweep`` only with
``record_params=True``).
"""

import math

import algorithm_cases
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from quadratic import make_quadratic, quadratic_problem

import afl_jax
from afl_jax.algorithms import registry
from afl_jax.core import checks
from afl_jax.errors import ArgumentError, ConfigError, UserError
from afl_jax.pipeline import build_run
from afl_jax.pipeline import config as config_lib
from afl_jax.registry import Registry
from afl_jax.schedules.schedule import ScheduleError
from afl_jax.servers.ca2fl import ca2fl as ca2fl_server

TEST_NAME = 'api_validation_test_gain'


@pytest.fixture
def gain_algorithm():
  """A test algorithm whose hyperparameter ``gain`` is declared in [0, 1] at registration."""

  @afl_jax.algorithms.register(TEST_NAME, gain=checks.real(0.0, 1.0))
  def factory(client_lr=0.1, gain=0.5, weighting='uniform'):
    return afl_jax.algorithms.get(
      'fedbuff', client_lr=client_lr * gain, weighting=weighting
    )._replace(name=TEST_NAME)

  yield TEST_NAME
  registry.ALGORITHMS.unregister(TEST_NAME)


# ---- 1. hyperparameters: one spec, both doors ------------------------------------------
FINITE_POSITIVE = 'is invalid: must be a finite number > 0'


@pytest.mark.parametrize(
  'name,hp,message',
  [
    (
      'fedbuff',
      dict(client_lr=-0.1),
      "client_lr=-0.1 is invalid: must be > 0 (algorithm 'fedbuff')",
    ),
    ('fedbuff', dict(client_lr=math.nan), f'client_lr=nan {FINITE_POSITIVE}'),
    ('fedbuff', dict(client_lr=math.inf), f'client_lr=inf {FINITE_POSITIVE}'),
    ('fedbuff', dict(client_lr='0.1'), f"client_lr='0.1' {FINITE_POSITIVE}, not a str"),
    ('fedbuff', dict(server_lr=True), f'server_lr=True {FINITE_POSITIVE}, not a bool'),
    ('fedbuff', dict(weighting='size'), "weighting='size' is invalid: must be one of ('uniform',"),
    ('fedasync', dict(alpha=1.5), 'alpha=1.5 is invalid: must be in (0, 1]'),
    ('fedasync', dict(staleness='linear'), "staleness='linear' is invalid: must be one of ("),
    ('fedfa_delta', dict(window_size=2.5), 'window_size=2.5 is invalid: must be an integer >= 1'),
    ('fadas', dict(delay_adaptive=1), 'delay_adaptive=1 is invalid: must be a boolean'),
    (
      'multistage_fedgm',
      dict(betas=(0.9, 1.0)),
      'betas=(0.9, 1.0) is invalid: must be a non-empty',
    ),
    ('asynflc', dict(bits=64), 'bits=64 is invalid: must be an integer in [2, 32]'),
    ('masfl', dict(beta=0.0), 'beta=0.0 is invalid: must be in (0, 1]'),
  ],
)
def test_get_refuses_values_outside_the_spec_naming_field_value_and_range(name, hp, message):
  with pytest.raises(ConfigError) as err:
    afl_jax.algorithms.get(name, **hp)
  assert str(err.value).startswith(f'hparams.{message}'), str(err.value)
  assert isinstance(err.value, UserError)


# Each family's hyperparameters (and their combinations): a bad value is refused by
# ``algorithms.get`` with an error naming the field.
REFUSED = [
  ('fedac', dict(client_lr=0.0), 'client_lr'),
  ('fedac', dict(server_lr=-1.0), 'server_lr'),
  ('fedac', dict(beta1=1.0), 'beta1'),
  ('fedac', dict(beta2=-0.1), 'beta2'),
  ('fedac', dict(epsilon=0.0), 'epsilon'),
  ('fedac', dict(min_similarity=2.0), 'min_similarity'),
  ('fedac', dict(history=0), 'history'),
  ('fedac', dict(zero_cosine=1.5), 'zero_cosine'),
  ('fedac', dict(first_update='models'), 'first_update'),
  ('port', dict(client_lr=0.0), 'client_lr'),
  ('port', dict(server_lr=0.0), 'server_lr'),
  ('port', dict(similarity_weight=-1.0), 'similarity_weight'),
  ('port', dict(staleness_weight=-0.5), 'staleness_weight'),
  ('port', dict(staleness_bound=0.0), 'staleness_bound'),
  ('port', dict(reference='previous'), 'reference'),
  ('ca2fl', dict(server_lr=0.0), 'server_lr'),
  ('ca2fl', dict(client_lr=-0.1), 'client_lr'),
  ('fadas', dict(beta2=1.0), 'beta2'),
  ('fadas', dict(tau_c=-1), 'tau_c'),
  ('fadas', dict(delay_rule='inverse'), 'delay_rule'),
  ('masfl', dict(client_lr=0.1, server_lr=0.1, beta=1.5), 'beta'),
  ('adamasfl', dict(client_lr=-1.0, server_lr=0.1, beta=0.5), 'client_lr'),
  ('masfl', dict(client_lr=0.1, server_lr=0.1, beta=0.5, selection='random'), 'selection'),
  ('adamasfl', dict(arrivals_per_step=0, local_steps=1, num_rounds=100), 'arrivals_per_step'),
  ('fedfa_delta', dict(window_size=-1), 'window_size'),
  ('fedfa_param', dict(client_lr=0.0), 'client_lr'),
  ('fedfa_delta_prox', dict(mu=-0.1), 'mu'),
  ('fedfa_param', dict(server_lr=0.5), 'server_lr'),  # eq. (3) has no step size to set
  ('fedprox', dict(mu=-1.0), 'mu'),
  ('fedprox', dict(mu=float('nan')), 'mu'),
  ('fedbuff_prox', dict(client_lr=-0.1), 'client_lr'),
  ('fednova', dict(client_lr=0.0), 'client_lr'),
  ('fedbuff_nova', dict(server_lr=0.0), 'server_lr'),
  ('asynfl', dict(client_lr=0.0, num_clients=4), 'client_lr'),
  ('asynfl', dict(server_lr=-1.0, num_clients=4), 'server_lr'),
  ('asynfl', dict(num_clients=0), 'num_clients'),
  ('asynfl', dict(num_clients=2.5), 'num_clients'),
  ('asynfl', dict(num_clients=4, normalizer='mean'), 'normalizer'),
  ('asynfl', dict(num_clients=4, local_training='sometimes'), 'local_training'),
  ('asynflc', dict(num_clients=4, compressor='zip'), 'compressor'),
  ('asynflc', dict(num_clients=4, compressor='sign', fraction=0.1), 'fraction'),
  ('asynflc', dict(num_clients=4, compressor='top_k', bits=4), 'bits'),
  ('asynflc_ef', dict(num_clients=4, compressor='top_k', fraction=1.5), 'fraction'),
  ('asynflc_ef', dict(num_clients=4, compressor='qsgd', bits=1), 'bits'),
  # FedOPT's Alg. 2 options (Reddi et al.) apply only with convention='alg2'.
  ('fedopt', dict(bias_correction=True), "convention='alg2'"),
  ('fedopt', dict(tau_placement='inside'), "convention='alg2'"),
  ('fedopt', dict(convention='alg2', server_optimizer='amsgrad'), "'amsgrad' is optax's only"),
  (
    'fedopt',
    dict(convention='alg2', server_optimizer='adagrad', bias_correction=True),
    'FedAdagrad',
  ),
  ('fedopt', dict(convention='alg2', tau_placement='under'), 'tau_placement'),
  ('fedopt', dict(convention='alg2', bias_correction_offset=0), 'bias_correction_offset'),
  ('fedopt', dict(convention='alg3'), 'convention'),
]


@pytest.mark.parametrize('name,hp,match', REFUSED)
def test_every_family_refuses_a_bad_value_naming_the_field(name, hp, match):
  with pytest.raises(ValueError, match=match):
    afl_jax.algorithms.get(name, **hp)


def test_a_sequence_error_names_the_entry():
  with pytest.raises(ConfigError, match=r'finite numbers in \[0, 1\); entry 1 is 1.0'):
    afl_jax.algorithms.get('multistage_fedgm', betas=(0.9, 1.0, 0.5))


@pytest.mark.parametrize(
  'name,hp',
  [
    ('fedbuff', dict(client_lr=0.1, server_lr=1)),  # an int where a float is the default
    ('fedbuff', dict(client_lr=np.float32(0.05), weighting='examples')),
    ('fedbuff', dict(client_lr=optax.linear_schedule(0.1, 0.01, 10))),  # schedules pass
    ('fedasync', dict(alpha=1.0, staleness='hinge', a=1.0, b=0.0)),
    ('fedecho', dict(clip_norm=math.inf)),  # inf = no clipping, declared as allowed
    ('multistage_fedgm', dict(betas=np.array([0.9, 0.0, 0.5]))),
    ('masfl', dict(client_lr=None, beta=1.0)),  # None where the default is None
  ],
)
def test_valid_values_still_pass_the_spec(name, hp):
  for k, v in hp.items():
    assert afl_jax.algorithms.ALGORITHMS.violation(name, k, v) is None, (k, v)


def test_valid_values_still_build():
  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1, server_lr=1)
  assert alg.name == 'fedbuff'
  schedule = optax.linear_schedule(0.1, 0.01, 10)
  assert afl_jax.algorithms.get('fedbuff', client_lr=schedule).name == 'fedbuff'


def test_every_hyperparameter_has_a_spec_or_says_nothing():
  """Declared, shared or inferred from the default; unchecked only where the default is
  None or a sequence (then the factory checks it)."""
  for name in afl_jax.algorithms.names():
    defaults = afl_jax.algorithms.hyperparameters(name)
    for k, spec in afl_jax.algorithms.hyperparameter_specs(name).items():
      if spec is None:
        assert defaults[k] is None or isinstance(defaults[k], tuple), (name, k)
      else:
        assert afl_jax.algorithms.ALGORITHMS.violation(name, k, defaults[k]) is None, (name, k)


def test_config_door_reaches_the_same_spec():
  c = config_lib.default()
  c.hparams = {'client_lr': '0.1', 'server_lr': 1.0}
  with pytest.raises(ConfigError, match=rf"^config.hparams.client_lr='0.1' {FINITE_POSITIVE}"):
    config_lib.validate(c)
  c.hparams = {'client_lr': -0.1, 'server_lr': 1.0}
  with pytest.raises(
    ConfigError, match=r'^config.hparams.client_lr=-0.1 is invalid: must be > 0\.$'
  ):
    build_run(c)  # validated before any data is loaded
  c.hparams = {'client_lr': 0.1, 'server_lr': 1.0}
  c.sweep = {'hparams': {'client_lr': [0.1, -1.0]}}
  with pytest.raises(ConfigError, match=r'client_lr=\[0.1, -1.0\] is invalid: the value -1.0 must'):
    config_lib.validate(c)


def test_a_spec_declared_at_registration_checks_get_sweep_and_build(gain_algorithm, quad):
  assert afl_jax.algorithms.hyperparameter_specs(gain_algorithm)['gain'].describe() == (
    'a finite number in [0, 1]'
  )
  with pytest.raises(ConfigError, match=r'^hparams.gain=1.5 is invalid: must be in \[0, 1\]'):
    afl_jax.algorithms.get(gain_algorithm, gain=1.5)
  problem, schedule, params0 = quad
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ConfigError, match=r'^replica 1: hparams.gain=2.0 is invalid: must be in'):
    afl_jax.sweep(gain_algorithm, problem, schedule, params0, keys, gain=[0.5, 2.0])
  c = config_lib.default()
  c.dataset, c.num_clients, c.schedule.concurrency, c.schedule.buffer_size = 'digits', 12, 4, 2
  c.num_rounds, c.eval_every, c.batch_size = 10, 10, 16
  config_lib.set_algorithm(c, gain_algorithm, gain=1.5)
  with pytest.raises(
    ConfigError, match=r'^config.hparams.gain=1.5 is invalid: must be in \[0, 1\]\.$'
  ):
    build_run(c)
  config_lib.set_algorithm(c, gain_algorithm, gain=0.25)
  assert build_run(c).algorithm.name == gain_algorithm  # valid: builds


def test_sweep_checks_every_replica_before_compute(quad):
  problem, schedule, params0 = quad
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(
    ConfigError, match=r'^replica 1: hparams.client_lr=-1.0 is invalid: must be > 0'
  ):
    afl_jax.sweep('fedbuff', problem, schedule, params0, keys, client_lr=[0.1, -1.0])
  with pytest.raises(ConfigError, match=r"^hparams.weighting='size' is invalid: must be one of"):
    afl_jax.sweep('fedbuff', problem, schedule, params0, keys, weighting='size')


# ---- 2. params that do not fit the problem -------------------------------------------
NOT_FIT = r'params0 does not fit the problem: loss_fn\(params0, a batch of client 0\) raised '
BATCH = r"client 0's batch has batch\['a'\] float32\[5, 4\], batch\['b'\] float32\[5\]"
WHAT = 'Pass params0 with the structure and leaf shapes that loss_fn reads'


@pytest.mark.parametrize(
  'params0,message',
  [
    (
      {'x': jnp.zeros(3)},
      rf"{NOT_FIT}TypeError: dot_general.*params0\['x'\] float32\[3\]; {BATCH}",
    ),
    ({'w': jnp.zeros(4)}, rf"{NOT_FIT}KeyError: 'x'.*params0\['w'\] float32\[4\]; {BATCH}. {WHAT}"),
    ({'x': jnp.zeros(4, jnp.int32)}, r"params0\['x'\] has dtype int32; .* pass it as jnp.asarray"),
    ({'x': 'abc'}, r"params0\['x'\]='abc' is not an array; every leaf of params0 must be"),
    ({}, r'params0=\{\} holds no arrays'),
  ],
)
def test_params_that_do_not_fit_the_problem_are_one_error(quad, params0, message):
  problem, schedule, _ = quad
  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1)
  with pytest.raises(ArgumentError, match=message):
    afl_jax.simulate(alg, problem, schedule, params0, jax.random.key(0))
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ArgumentError, match=message):
    afl_jax.sweep('fedbuff', problem, schedule, params0, keys)


def test_loss_must_be_a_scalar_and_stacked_params_need_axis_r(quad):
  problem, schedule, params0 = quad
  vector = problem.replace(loss_fn=lambda p, b: b['a'] @ p['x'] - b['b'])
  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1)
  with pytest.raises(ArgumentError, match=r'must return a scalar; it returns float32\[5\]'):
    afl_jax.simulate(alg, vector, schedule, params0, jax.random.key(0))
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ArgumentError, match=r'leading axis of R=2 .*params0\[.x.\] float32\[3, 4\]'):
    afl_jax.sweep(
      'fedbuff', problem, schedule, {'x': jnp.zeros((3, 4))}, keys, params_per_replica=True
    )


# ---- 3. a schedule built for another number of clients --------------------------------
def test_schedule_for_fewer_clients_says_pass_num_clients(quad):
  problem, _, params0 = quad
  short = afl_jax.schedules.from_arrays([0, 1, 0], [0, 0, 1])  # client 2 never arrives: N = 2
  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1)
  mismatch = r'schedule.num_clients=2 but the problem has 3 clients; .*\(\.\.\., num_clients=3\)'
  with pytest.raises(ScheduleError, match=mismatch):
    afl_jax.simulate(alg, problem, short, params0, jax.random.key(0))
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ScheduleError, match=r'schedule 0: .*num_clients=3'):
    afl_jax.sweep('fedbuff', problem, short, params0, keys)
  exact = afl_jax.schedules.from_arrays([0, 1, 0], [0, 0, 1], num_clients=3)
  assert exact.num_clients == 3
  afl_jax.simulate(alg, problem, exact, params0, jax.random.key(0))


# Algorithms whose server keeps per-client state sized by the server's own num_clients
# (no joint initializer): built here as a user would, from the standalone server rules.
SIZED_BY_THE_SERVER = {
  'ca2fl': lambda **kw: afl_jax.Algorithm(
    'ca2fl', afl_jax.clients.local_sgd(0.1), ca2fl_server(**kw)
  ),
  'fedac': lambda **kw: afl_jax.algorithms.get('fedac')._replace(
    server=afl_jax.servers.fedac_server(**kw), init=None
  ),
}


@pytest.mark.parametrize('name', sorted(SIZED_BY_THE_SERVER))
def test_server_sized_for_fewer_clients_than_the_problem_is_one_error(name):
  """The standalone default num_clients=10 on 12 clients: refused, never clamped."""
  a, b = make_quadratic(num_clients=12, dim=4)
  problem = quadratic_problem(a, b)
  schedule = afl_jax.schedules.from_arrays([11, 3, 10], [0, 0, 1], local_steps=2)
  params0, key = {'x': jnp.zeros(4)}, jax.random.key(0)
  alg = SIZED_BY_THE_SERVER[name]()
  message = (
    f'{name}: the server keeps per-client state for num_clients=10 (client ids in [0, 9]) '
    'but the problem has 12 clients (ids in [0, 11]); build the server with num_clients=12.'
  )
  with pytest.raises(ArgumentError) as err:
    afl_jax.simulate(alg, problem, schedule, params0, key)
  assert str(err.value) == message  # one line (JAX's traceback note is a __notes__ entry)
  with pytest.raises(ArgumentError) as err:
    afl_jax.sweep(alg, problem, schedule, params0, jax.random.split(key, 2))
  assert str(err.value) == message
  sized = SIZED_BY_THE_SERVER[name](num_clients=12)
  afl_jax.simulate(sized, problem, schedule, params0, key)


# ---- 4. sweep: keys, and a built Algorithm --------------------------------------------
def test_sweep_without_keys_is_one_error(quad):
  problem, schedule, params0 = quad
  none = jax.random.split(jax.random.key(0), 0)
  split = r'jax.random.split\(jax.random.key\(seed\), R\)'
  with pytest.raises(
    ArgumentError, match=rf'keys holds no keys \(R = 0 replicas\); .*{split} with R'
  ):
    afl_jax.sweep('fedbuff', problem, schedule, params0, none)
  with pytest.raises(ArgumentError, match=rf'one per replica; got .* of shape \(\)\. Pass {split}'):
    afl_jax.sweep('fedbuff', problem, schedule, params0, jax.random.key(0))


def test_sweep_takes_a_built_algorithm_like_simulate(quad):
  problem, schedule, params0 = quad
  keys = jax.random.split(jax.random.key(0), 2)
  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1)
  built = afl_jax.sweep(alg, problem, schedule, params0, keys)
  named = afl_jax.sweep('fedbuff', problem, schedule, params0, keys, client_lr=0.1)
  np.testing.assert_array_equal(np.asarray(built.params['x']), np.asarray(named.params['x']))
  alone = afl_jax.simulate(alg, problem, schedule, params0, keys[1])
  np.testing.assert_allclose(built.params['x'][1], alone.params_history['x'][-1], rtol=1e-6)
  with pytest.raises(
    ArgumentError, match=r"built algorithm 'fedbuff' and \['client_lr'\].*pass a registered name"
  ):
    afl_jax.sweep(alg, problem, schedule, params0, keys, client_lr=[0.1, 0.2])
  with pytest.raises(
    ArgumentError, match='registered algorithm name .* or an afl_jax.Algorithm; got int'
  ):
    afl_jax.sweep(3, problem, schedule, params0, keys)


# ---- 5. re-registering a name ---------------------------------------------------------
def test_registering_a_name_again_needs_replace():
  r = Registry('widget')
  r.register('a', lambda: 1, colour='red')
  with pytest.raises(ValueError, match="widget 'a' is registered twice; .*pass replace=True"):
    r.register('a', lambda: 2)
  r.register('a', lambda: 3, replace=True, colour='blue')
  assert r.get('a')() == 3 and r.meta('a') == {'colour': 'blue'} and len(r) == 1


def test_reregistering_an_algorithm_in_a_notebook(gain_algorithm):
  with pytest.raises(ValueError, match='registered twice.*replace=True'):
    afl_jax.algorithms.register(gain_algorithm)(lambda client_lr=0.1: None)

  @afl_jax.algorithms.register(gain_algorithm, gain=checks.real(0.0, 2.0), replace=True)
  def again(client_lr=0.1, gain=1.0):
    return afl_jax.algorithms.get('fedbuff', client_lr=client_lr * gain)

  assert afl_jax.algorithms.hyperparameters(gain_algorithm) == {'client_lr': 0.1, 'gain': 1.0}
  assert afl_jax.algorithms.get(gain_algorithm, gain=1.5).name == 'fedbuff'  # the new range
  assert afl_jax.algorithms.context(gain_algorithm) == ()


def test_register_refuses_specs_for_arguments_the_factory_lacks():
  with pytest.raises(ValueError, match=r"ranges \['gian'\] are not settings of"):
    afl_jax.algorithms.register('never_registered', gian=checks.POSITIVE)(lambda gain=0.5: None)
  with pytest.raises(TypeError, match='must be a checks.Spec'):
    afl_jax.algorithms.register('never_registered', gain=(0, 1))
  assert 'never_registered' not in afl_jax.algorithms.names()


# ---- 6. what simulate and sweep return (Result's docstring) ------------------------------
# 3 clients, M = 2 with one padded slot (step 1), stale starts, K = 2.
RESULT_IDS = [[0, 1], [2, 0], [1, 2], [0, 1]]
RESULT_START = [[0, 0], [0, 1], [1, 2], [2, 3]]
RESULT_MASK = [[1, 1], [1, 0], [1, 1], [1, 1]]
EVERY_RUN = {'arrivals', 'bits_up', 'bits_down', 'client/train_loss'}
DOCUMENTED = {  # the keys Result's docstring names for these algorithms
  'fedbuff': {'server/update_norm'},
  'fedgm': {'server/server_lr', 'server/beta', 'server/nu'},
  'fedfa_param': {'server/aggregations'},
  'fedac': {'client/variate_evicted', 'server/weight_max'},
}


def _result_run():
  a, b = make_quadratic(num_clients=3, dim=4)
  schedule = afl_jax.schedules.from_arrays(
    RESULT_IDS, RESULT_START, local_steps=2, mask=RESULT_MASK, num_clients=3
  )
  return a, b, quadratic_problem(a, b), schedule, {'x': jnp.linspace(-1.0, 1.0, 4)}


@pytest.mark.parametrize('name', sorted(DOCUMENTED))
def test_result_metrics_have_the_documented_keys(name):
  _, _, problem, schedule, params0 = _result_run()
  res = afl_jax.simulate(
    algorithm_cases.build(name, algorithm_cases.run_info(3)),
    problem,
    schedule,
    params0,
    jax.random.key(0),
  )
  keys = set(res.metrics)
  assert EVERY_RUN | DOCUMENTED[name] <= keys, sorted(keys)
  assert all(k in EVERY_RUN or k.startswith(('client/', 'server/')) for k in keys), sorted(keys)
  for k, v in res.metrics.items():
    assert np.shape(v) == (schedule.num_steps,), k  # one value per server step
  assert res.params_history['x'].shape == (schedule.num_steps, 4)  # always filled


def test_result_metric_values_and_params_history():
  """arrivals, bits (32 per value), train_loss averaged over the clients that trained."""
  a, b, problem, schedule, params0 = _result_run()
  lr, k = 0.1, 2
  alg = afl_jax.algorithms.get('fedbuff', client_lr=lr)
  res = afl_jax.simulate(alg, problem, schedule, params0, jax.random.key(0))
  mask = np.asarray(RESULT_MASK, bool)
  np.testing.assert_array_equal(res.metrics['arrivals'], mask.sum(1))
  np.testing.assert_array_equal(res.metrics['bits_up'], 32 * 4 * mask.sum(1))
  np.testing.assert_array_equal(res.metrics['bits_down'], 32 * 4 * mask.sum(1))
  history = np.concatenate([np.asarray(params0['x'])[None], np.asarray(res.params_history['x'])])
  want = []
  for t in range(schedule.num_steps):
    losses = []
    for i, s, valid in zip(RESULT_IDS[t], RESULT_START[t], mask[t], strict=True):
      x = history[s].astype(np.float64)
      steps = []
      for _ in range(k):  # the mean loss of the K full-batch steps run
        r = a[i] @ x - b[i]
        steps.append(0.5 * r @ r)
        x = x - lr * a[i].T @ r
      if valid:
        losses.append(np.mean(steps))
    want.append(np.mean(losses))
  np.testing.assert_allclose(res.metrics['client/train_loss'], want, rtol=1e-5)
  last = res.final_state.server.params['x']
  np.testing.assert_array_equal(res.params_history['x'][-1], last)


def test_params_history_only_with_record_params():
  _, _, problem, schedule, params0 = _result_run()
  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.1)
  for record in (False, True):
    sim = afl_jax.Simulator(alg, problem, schedule, record_params=record)
    _, out = sim.run_chunk(sim.init(params0, jax.random.key(0)), jax.random.key(0))
    assert ('params' in out) == record
  keys = jax.random.split(jax.random.key(0), 2)
  alone = afl_jax.simulate(alg, problem, schedule, params0, keys[1])
  plain = afl_jax.sweep('fedbuff', problem, schedule, params0, keys, client_lr=0.1)
  assert plain.params_history is None
  assert set(plain.metrics) == set(alone.metrics)
  assert all(np.shape(v) == (2, schedule.num_steps) for v in plain.metrics.values())
  recorded = afl_jax.sweep(
    'fedbuff', problem, schedule, params0, keys, client_lr=0.1, record_params=True
  )
  assert recorded.params_history['x'].shape == (2, schedule.num_steps, 4)
  np.testing.assert_allclose(recorded.params_history['x'][1], alone.params_history['x'], rtol=1e-6)
  np.testing.assert_array_equal(recorded.params_history['x'][:, -1], recorded.params['x'])


def test_positive_int_takes_numpy_integers_and_refuses_the_rest():
  """An integer count given as a NumPy scalar (e.g. from an array's shape) is an integer."""
  assert checks.positive_int('n', np.int64(3)) == 3 and checks.positive_int('n', 2.0) == 2
  for bad in (True, np.bool_(True), 0, 2.5, float('inf'), float('nan'), '3', np.float32(1.5)):
    with pytest.raises(ValueError, match=r'^n must be an integer >= 1; got '):
      checks.positive_int('n', bad)
