"""AsynFL (Yang, Hou, Wu): the server rule (eq. (5)) under jit, its n, and the schedules
continuous training (eq. (4)) refuses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import hand_arrivals, make_quadratic, quadratic_problem

import afl_jax
from afl_jax.algorithms import _asynfl as asynfl_lib


@pytest.mark.parametrize(
  'normalizer,num_clients,denominator',
  [('clients', 5, 5), ('arrivals', 5, 2), ('clients', None, 5), ('clients', 7, 7)],
)
def test_server_rule_under_jit_is_eq_5(normalizer, num_clients, denominator):
  """n = num_clients; alone, with num_clients=None, n is the arrival axis's width (5)."""
  server = asynfl_lib.asynfl_server(0.8, normalizer=normalizer, num_clients=num_clients)
  x = np.array([1.0, -2.0, 0.5], np.float32)
  msgs = np.arange(15, dtype=np.float32).reshape(5, 3) / 7.0
  mask = np.array([True, False, False, True, False])
  arrivals = hand_arrivals(np.arange(5), mask, start_broadcast={'x': jnp.zeros((5, 3))})
  state = server.init({'x': jnp.asarray(x)})
  state, _ = jax.jit(server.update)(state, {'x': jnp.asarray(msgs)}, arrivals, jax.random.key(0))
  # Our Delta = -(paper's): x_{t+1} = x_t - eta_g / denominator * sum_{S_t} Delta.
  expected = x - 0.8 / denominator * (msgs[0] + msgs[3])
  np.testing.assert_allclose(server.params(state)['x'], expected, rtol=1e-6)


def test_server_rejects_num_clients_that_does_not_match_the_run():
  a, b = make_quadratic(num_clients=3)
  sched = afl_jax.schedules.from_arrays([[0], [1]], [[0], [1]], num_clients=3)
  alg = afl_jax.algorithms.make('asynfl', client_lr=0.1, num_clients=100)
  with pytest.raises(ValueError, match='num_clients=100'):
    afl_jax.simulate(alg, quadratic_problem(a, b), sched, {'x': jnp.zeros(4)}, jax.random.key(0))


def test_continuous_training_rejects_start_steps_it_cannot_honour_before_compute():
  """Eq. (4): a client restarts from x_{t+1} only after reporting at t; starts must agree."""
  a, b = make_quadratic(num_clients=3)
  problem = quadratic_problem(a, b)
  alg = afl_jax.algorithms.make('asynfl', client_lr=0.1, num_clients=3)
  # Client 0 reports at step 0 (start 0, fine), then at step 2 claiming start 2, but it
  # synchronized to version 1 after its report at step 0.
  sched = afl_jax.schedules.from_arrays([[0], [1], [0]], [[0], [0], [2]], num_clients=3)
  with pytest.raises(afl_jax.schedules.ScheduleError, match=r'client 0 arriving at step 2.*not 1'):
    afl_jax.Simulator(alg, problem, sched)
  # The same schedule with the implied starts runs; so does the per-job option.
  ok = afl_jax.schedules.from_arrays([[0], [1], [0]], [[0], [0], [1]], num_clients=3)
  afl_jax.Simulator(alg, problem, ok)
  per_job = afl_jax.algorithms.make(
    'asynfl', client_lr=0.1, num_clients=3, local_training='per_job'
  )
  afl_jax.Simulator(per_job, problem, sched)
  np.testing.assert_array_equal(asynfl_lib.continuous_starts(sched), [[0], [0], [1]])


def test_continuous_training_rejects_a_client_whose_local_steps_vary():
  a, b = make_quadratic(num_clients=2)
  alg = afl_jax.algorithms.make('asynflc_ef', client_lr=0.1, num_clients=2)
  sched = afl_jax.schedules.from_arrays(
    [[0], [0]], [[0], [1]], local_steps=[[2], [3]], num_clients=2
  )
  with pytest.raises(afl_jax.schedules.ScheduleError, match='client 0 has local_steps from 2 to 3'):
    afl_jax.simulate(alg, quadratic_problem(a, b), sched, {'x': jnp.zeros(4)}, jax.random.key(0))


def test_prepare_takes_n_from_the_schedule():
  """Without num_clients, prepare sizes eq. (5)'s n from the run's schedule."""
  sched = afl_jax.schedules.from_arrays([[0], [1]], [[0], [1]], num_clients=3)
  alone = afl_jax.algorithms.make('asynfl', client_lr=0.1, local_training='per_job')
  given = afl_jax.algorithms.make('asynfl', client_lr=0.1, num_clients=3, local_training='per_job')
  run = afl_jax.core.types.prepared(alone, sched)
  x = {'x': jnp.ones(2)}
  arrivals = hand_arrivals([0], [True], start_broadcast={'x': jnp.zeros((1, 2))})
  msgs, key = {'x': jnp.full((1, 2), 3.0)}, jax.random.key(0)
  got, _ = run.server.update(run.server.init(x), msgs, arrivals, key)
  want, _ = given.server.update(given.server.init(x), msgs, arrivals, key)
  np.testing.assert_array_equal(got.params['x'], want.params['x'])
  np.testing.assert_allclose(got.params['x'], 1.0 - 1.0 * 3.0 / 3)
