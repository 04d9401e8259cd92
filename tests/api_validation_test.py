"""The Python API refuses what cannot work with one error that says what to pass; what
``simulate`` and ``sweep`` return is what ``Result``'s docstring says."""

import algorithm_cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic, quadratic_problem

import afl_jax
from afl_jax.errors import ArgumentError
from afl_jax.schedules.schedule import ScheduleError

# ---- params that do not fit the problem -------------------------------------------
NOT_FIT = r'params0 does not fit the problem: loss_fn\(params0, a batch of client 0\) raised '
BATCH = r"client 0's batch has batch\['a'\] float32\[5, 4\], batch\['b'\] float32\[5\]"
WHAT = 'Pass params0 with the structure and leaf shapes that loss_fn reads'
FEDBUFF = afl_jax.algorithms.make('fedbuff', client_lr=0.1)


@pytest.mark.parametrize(
  'params0,message',
  [
    (
      {'x': jnp.zeros(3)},
      rf"{NOT_FIT}TypeError: dot_general.*params0\['x'\] float32\[3\]; {BATCH}",
    ),
    ({'w': jnp.zeros(4)}, rf"{NOT_FIT}KeyError: 'x'.*params0\['w'\] float32\[4\]; {BATCH}. {WHAT}"),
    ({'x': jnp.zeros(4, jnp.int32)}, r"params0\['x'\] has dtype int32; pass it as jnp.asarray"),
    ({'x': 'abc'}, r"params0\['x'\]='abc' is not an array; every leaf of params0 must be"),
    ({}, r'params0=\{\} holds no arrays'),
  ],
)
def test_params_that_do_not_fit_the_problem_are_one_error(quad, params0, message):
  problem, schedule, _ = quad
  with pytest.raises(ArgumentError, match=message):
    afl_jax.simulate(FEDBUFF, problem, schedule, params0, jax.random.key(0))
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ArgumentError, match=message):
    afl_jax.sweep('fedbuff', problem, schedule, params0, keys)


def test_loss_must_be_a_scalar(quad):
  problem, schedule, params0 = quad
  vector = problem.replace(loss_fn=lambda p, b: b['a'] @ p['x'] - b['b'])
  with pytest.raises(ArgumentError, match=r'must return a scalar; it returns float32\[5\]'):
    afl_jax.simulate(FEDBUFF, vector, schedule, params0, jax.random.key(0))


# ---- a schedule built for another number of clients --------------------------------
def test_schedule_for_fewer_clients_says_pass_num_clients(quad):
  problem, _, params0 = quad
  short = afl_jax.schedules.from_arrays([0, 1, 0], [0, 0, 1])  # client 2 never arrives: N = 2
  mismatch = r'schedule.num_clients=2 but the problem has 3 clients; .*\(\.\.\., num_clients=3\)'
  with pytest.raises(ScheduleError, match=mismatch):
    afl_jax.simulate(FEDBUFF, problem, short, params0, jax.random.key(0))
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ScheduleError, match=r'schedule 0: .*num_clients=3'):
    afl_jax.sweep('fedbuff', problem, short, params0, keys)
  exact = afl_jax.schedules.from_arrays([0, 1, 0], [0, 0, 1], num_clients=3)
  afl_jax.simulate(FEDBUFF, problem, exact, params0, jax.random.key(0))


SIZED_BY_THE_SERVER = {  # per-client server state sized by the server's own num_clients
  'ca2fl': lambda **kw: afl_jax.Algorithm(
    'ca2fl', afl_jax.clients.local_sgd(0.1), afl_jax.servers.ca2fl(**kw)
  ),
  'fedac': lambda **kw: afl_jax.algorithms.make('fedac')._replace(
    server=afl_jax.servers.fedac(**kw), init=None
  ),
}


@pytest.mark.parametrize('name', sorted(SIZED_BY_THE_SERVER))
def test_server_sized_for_fewer_clients_than_the_problem_is_one_error(name):
  """The standalone default num_clients=10 on 12 clients: refused, never clamped."""
  problem = quadratic_problem(*make_quadratic(num_clients=12, dim=4))
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


# ---- sweep: keys, and a built Algorithm --------------------------------------------
def test_sweep_without_keys_is_one_error(quad):
  problem, schedule, params0 = quad
  none = jax.random.split(jax.random.key(0), 0)
  split = r'jax.random.split\(jax.random.key\(seed\), R\)'
  no_keys = rf'keys holds no keys \(R = 0 replicas\); .*{split} with R'
  with pytest.raises(ArgumentError, match=no_keys):
    afl_jax.sweep('fedbuff', problem, schedule, params0, none)
  with pytest.raises(ArgumentError, match=rf'one per replica; got .* of shape \(\)\. Pass {split}'):
    afl_jax.sweep('fedbuff', problem, schedule, params0, jax.random.key(0))


def test_sweep_takes_a_built_algorithm_like_simulate(quad):
  problem, schedule, params0 = quad
  keys = jax.random.split(jax.random.key(0), 2)
  built = afl_jax.sweep(FEDBUFF, problem, schedule, params0, keys)
  named = afl_jax.sweep('fedbuff', problem, schedule, params0, keys, client_lr=0.1)
  np.testing.assert_array_equal(np.asarray(built.params['x']), np.asarray(named.params['x']))
  alone = afl_jax.simulate(FEDBUFF, problem, schedule, params0, keys[1])
  np.testing.assert_allclose(built.params['x'][1], alone.params_history['x'][-1], rtol=1e-6)
  built_and = r"built algorithm 'fedbuff' and \['client_lr'\].*pass a registered name"
  with pytest.raises(ArgumentError, match=built_and):
    afl_jax.sweep(FEDBUFF, problem, schedule, params0, keys, client_lr=[0.1, 0.2])
  with pytest.raises(ArgumentError, match='an algorithm name or an afl_jax.Algorithm; got int 3'):
    afl_jax.sweep(3, problem, schedule, params0, keys)


# ---- what simulate and sweep return (Result's docstring) ------------------------------
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
  alg = algorithm_cases.build(name, algorithm_cases.run_info(3))
  res = afl_jax.simulate(alg, problem, schedule, params0, jax.random.key(0))
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
  alg = afl_jax.algorithms.make('fedbuff', client_lr=lr)
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
  np.testing.assert_array_equal(res.params_history['x'][-1], res.final_state.server.params['x'])


def test_params_history_only_with_record_params():
  _, _, problem, schedule, params0 = _result_run()
  for record in (False, True):
    sim = afl_jax.Simulator(FEDBUFF, problem, schedule, record_params=record)
    _, out = sim.run_chunk(sim.init(params0, jax.random.key(0)), jax.random.key(0))
    assert ('params' in out) == record
  keys = jax.random.split(jax.random.key(0), 2)
  alone = afl_jax.simulate(FEDBUFF, problem, schedule, params0, keys[1])
  plain = afl_jax.sweep('fedbuff', problem, schedule, params0, keys, client_lr=0.1)
  assert plain.params_history is None
  assert set(plain.metrics) == set(alone.metrics)
  assert all(np.shape(v) == (2, schedule.num_steps) for v in plain.metrics.values())
  opts = dict(client_lr=0.1, record_params=True)
  recorded = afl_jax.sweep('fedbuff', problem, schedule, params0, keys, **opts)
  assert recorded.params_history['x'].shape == (2, schedule.num_steps, 4)
  np.testing.assert_allclose(recorded.params_history['x'][1], alone.params_history['x'], rtol=1e-6)
  np.testing.assert_array_equal(recorded.params_history['x'][:, -1], recorded.params['x'])
