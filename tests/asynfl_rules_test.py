"""AsynFL's rules on their own (under jax.jit), error feedback through the engine, registry.

Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated Learning with
Gradient Compression for Non-Convex Optimization": eqs. (2)-(4) (client), (5)
(server), (8)-(9) and Algorithm 1 lines 13 and 16 (error feedback).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import hand_arrivals, make_quadratic, np_local_gd, quadratic_problem, quadratic_task

import afl_jax
from afl_jax.algorithms import _asynfl as asynfl_lib


def test_client_rule_under_jit_restarts_after_sync_else_continues(x64):
  a, b = make_quadratic(num_clients=1, dtype=np.float64)
  rule = afl_jax.clients.always_on_sgd(0.3)
  update = jax.jit(rule.update)
  x_t = np.array([0.5, -1.0, 2.0, 0.0])  # the current global model (the broadcast)
  local, anchor = np.array([1.0, 1.0, -1.0, 3.0]), np.array([0.0, 2.0, 1.0, -1.0])
  key = jax.random.key(0)

  # Reported at t-1 (synced): train from x_t, anchor to x_t (eq. 4, second case).
  synced = rule.init({'x': jnp.asarray(anchor)}, None, key)
  msg, state, metrics = update(
    {'x': jnp.asarray(x_t)}, synced, quadratic_task(a[0], b[0], 2, 4), key
  )
  x_k = np_local_gd(a[0], b[0], x_t, 0.3, 2)  # 2 of max 4 steps (masked scan)
  np.testing.assert_allclose(msg['x'], x_t - x_k, rtol=1e-12, atol=1e-14)
  np.testing.assert_allclose(state.anchor['x'], x_t, rtol=0, atol=0)
  assert bool(state.synced) and np.isfinite(metrics['train_loss'])

  # Did not report at t-1: continue from the local model, keep the old anchor
  # (eq. 4, first case; eq. 3 relative to x_{t - tau}).
  absent = afl_jax.clients.AlwaysOnState(
    {'x': jnp.asarray(local)}, {'x': jnp.asarray(anchor)}, jnp.asarray(False)
  )
  msg, state, _ = update(
    {'x': jnp.asarray(x_t)}, absent, quadratic_task(a[0], b[0], 3, 4, active=False), key
  )
  x_k = np_local_gd(a[0], b[0], local, 0.3, 3)
  np.testing.assert_allclose(msg['x'], anchor - x_k, rtol=1e-12, atol=1e-14)
  np.testing.assert_allclose(state.local['x'], x_k, rtol=1e-12, atol=1e-14)
  np.testing.assert_allclose(state.anchor['x'], anchor, rtol=0, atol=0)
  assert not bool(state.synced)


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
  alg = afl_jax.algorithms.get('asynfl', client_lr=0.1, num_clients=100)
  with pytest.raises(ValueError, match='num_clients=100'):
    afl_jax.simulate(alg, quadratic_problem(a, b), sched, {'x': jnp.zeros(4)}, jax.random.key(0))


def test_continuous_training_rejects_start_steps_it_cannot_honour_before_compute():
  """Eq. (4): a client restarts from x_{t+1} only after reporting at t; starts must agree."""
  a, b = make_quadratic(num_clients=3)
  problem = quadratic_problem(a, b)
  alg = afl_jax.algorithms.get('asynfl', client_lr=0.1, num_clients=3)
  # Client 0 reports at step 0 (start 0, fine), then at step 2 claiming start 2, but it
  # synchronized to version 1 after its report at step 0.
  sched = afl_jax.schedules.from_arrays([[0], [1], [0]], [[0], [0], [2]], num_clients=3)
  with pytest.raises(afl_jax.schedules.ScheduleError, match=r'client 0 arriving at step 2.*not 1'):
    afl_jax.Simulator(alg, problem, sched)
  # The same schedule with the implied starts runs; so does the per-job option.
  ok = afl_jax.schedules.from_arrays([[0], [1], [0]], [[0], [0], [1]], num_clients=3)
  afl_jax.Simulator(alg, problem, ok)
  per_job = afl_jax.algorithms.get('asynfl', client_lr=0.1, num_clients=3, local_training='per_job')
  afl_jax.Simulator(per_job, problem, sched)
  np.testing.assert_array_equal(asynfl_lib.continuous_starts(sched), [[0], [0], [1]])


def test_continuous_training_rejects_a_client_whose_local_steps_vary():
  a, b = make_quadratic(num_clients=2)
  alg = afl_jax.algorithms.get('asynflc_ef', client_lr=0.1, num_clients=2)
  sched = afl_jax.schedules.from_arrays(
    [[0], [0]], [[0], [1]], local_steps=[[2], [3]], num_clients=2
  )
  with pytest.raises(afl_jax.schedules.ScheduleError, match='client 0 has local_steps from 2 to 3'):
    afl_jax.simulate(alg, quadratic_problem(a, b), sched, {'x': jnp.zeros(4)}, jax.random.key(0))


# One reporter per step; client 2 reports at step 1 and is then absent for 5 steps.
REPORTS = [0, 2, 1, 0, 1, 0, 1]
N, DIM, K, LR = 3, 5, 2, 0.25


def _ef_schedule():
  """start_step = the step after the client's previous report (0 before its first)."""
  last = {}
  start = []
  for t, i in enumerate(REPORTS):
    start.append(last.get(i, 0))
    last[i] = t + 1
  return afl_jax.schedules.from_arrays(
    [[i] for i in REPORTS], [[s] for s in start], local_steps=K, num_clients=N
  )


def _ef_algorithm():
  # normalizer='arrivals', eta_g = 1, one reporter per step: x_{t+1} = x_t - sent_t.
  return afl_jax.algorithms.get(
    'asynflc_ef',
    client_lr=LR,
    server_lr=1.0,
    num_clients=N,
    compressor='top_k',
    fraction=0.2,
    normalizer='arrivals',
  )


def test_ef_telescoping_sum_sent_plus_residual_is_sum_delta_per_client(x64):
  a, b = make_quadratic(num_clients=N, dim=DIM, dtype=np.float64)
  x0 = np.linspace(-1, 1, DIM)
  sched = _ef_schedule()
  res = afl_jax.simulate(
    _ef_algorithm(), quadratic_problem(a, b), sched, {'x': jnp.asarray(x0)}, jax.random.key(0)
  )
  xs = np.concatenate([x0[None], np.asarray(res.params_history['x'])])  # xs[s] = x_s
  residual = np.asarray(res.final_state.compressor.residual['x'])
  sent_sum, delta_sum = np.zeros((N, DIM)), np.zeros((N, DIM))
  for t, i in enumerate(REPORTS):
    s = sched.start_step[t, 0]
    sent_sum[i] += xs[t] - xs[t + 1]  # what the server applied
    # Continuous training: K steps in each of the rounds s..t, from x_s (eq. 4).
    delta_sum[i] += xs[s] - np_local_gd(a[i], b[i], xs[s], LR, K * (t - s + 1))
  np.testing.assert_allclose(sent_sum + residual, delta_sum, rtol=1e-10, atol=1e-12)
  assert (np.abs(residual).max(axis=1) > 1e-3).all()  # top-1 of 5 leaves a residual
  assert np.abs(sent_sum - delta_sum).max() > 1e-3


def test_absent_client_keeps_its_residual():
  a, b = make_quadratic(num_clients=N, dim=DIM)
  sched = _ef_schedule()
  sim = afl_jax.Simulator(_ef_algorithm(), quadratic_problem(a, b), sched, chunk_size=2)
  key = jax.random.key(0)
  state = sim.init({'x': jnp.linspace(-1.0, 1.0, DIM)}, key)
  state, _ = sim.run_chunk(state, key)  # steps 0, 1: client 2 has reported once
  after_report = np.array(state.compressor.residual['x'])
  while sim.position(state) < sched.num_steps:
    state, _ = sim.run_chunk(state, key)
  final = np.array(state.compressor.residual['x'])
  assert np.abs(after_report[2]).max() > 0
  np.testing.assert_array_equal(final[2], after_report[2])  # frozen for 5 steps
  assert np.abs(final[1] - after_report[1]).max() > 0  # clients 0, 1 kept reporting
  assert np.abs(final[0] - after_report[0]).max() > 0


def test_local_training_and_compressor_choose_the_regime_and_the_upload():
  get = afl_jax.algorithms.get
  assert get('asynfl', num_clients=4).regime == 'always_on'
  assert get('asynfl', normalizer='arrivals').regime == 'always_on'  # n not needed
  assert get('asynfl', local_training='per_job').regime == 'per_job'
  assert get('asynfl').compressor is None and get('asynflc').compressor is not None
  assert afl_jax.algorithms.context('asynflc_ef') == ('num_clients',)


def test_prepare_takes_n_from_the_schedule():
  """Without num_clients, prepare sizes eq. (5)'s n from the run's schedule."""
  sched = afl_jax.schedules.from_arrays([[0], [1]], [[0], [1]], num_clients=3)
  alone = afl_jax.algorithms.get('asynfl', client_lr=0.1, local_training='per_job')
  given = afl_jax.algorithms.get('asynfl', client_lr=0.1, num_clients=3, local_training='per_job')
  run = afl_jax.core.types.prepared(alone, sched)
  x = {'x': jnp.ones(2)}
  arrivals = hand_arrivals([0], [True], start_broadcast={'x': jnp.zeros((1, 2))})
  msgs, key = {'x': jnp.full((1, 2), 3.0)}, jax.random.key(0)
  got, _ = run.server.update(run.server.init(x), msgs, arrivals, key)
  want, _ = given.server.update(given.server.init(x), msgs, arrivals, key)
  np.testing.assert_array_equal(got.params['x'], want.params['x'])
  np.testing.assert_allclose(got.params['x'], 1.0 - 1.0 * 3.0 / 3)
