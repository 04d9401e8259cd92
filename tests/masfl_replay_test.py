"""MasFL / AdaMasFL (Yan et al., paper 000) through the engine against Alg. 1-4 in NumPy (full-batch
quadratic clients: the stochastic gradients are exact)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import (
  arrivals_at,
  fresh_schedule,
  logistic_problem,
  make_quadratic,
  np_grad,
  simulate_quadratic,
  stale_schedule,
  stale_setup,
)

import afl_jax
from afl_jax.algorithms._masfl import history_depth


def np_masfl(schedule, a, b, x0, eta, gamma, beta, adaptive):
  """Alg. 1-2 (MasFL) or Alg. 3-4 (AdaMasFL) with S_t = the arrivals of step t.

  c~_i of a job that started from version s is what client i last sent among its
  jobs that had ARRIVED before step s (c_i^0 if none): causal even when the client
  has several jobs in flight. Computed in float64 whatever the inputs' dtype.
  """
  a, b, x0 = (np.asarray(v, np.float64) for v in (a, b, x0))
  n = a.shape[0]
  c_i = np.stack([np_grad(a[i], b[i], x0) for i in range(n)])  # line 1: K grads at theta^0
  sent = {i: [(-1, c_i[i].copy())] for i in range(n)}  # (arrival step, variate) per client
  c = c_i.mean(0)
  g = c.copy()
  thetas, directions = [x0.copy()], [beta * c + (1 - beta) * g]
  for t in range(schedule.num_steps):
    arrived = {}
    for i, s, k in arrivals_at(schedule, t):
      c_tilde = [c for when, c in sent[i] if when < s][-1]
      x, grads = thetas[s].copy(), []
      for _ in range(k):  # Alg. 2/4 lines 2-5
        gr = np_grad(a[i], b[i], x)
        grads.append(gr)
        gi = beta * (gr - c_tilde) + directions[s]
        if adaptive:
          norm = np.linalg.norm(gi)
          gi = gi / norm if norm > 0 else 0 * gi
        x = x - eta * gi
      arrived[i] = (np.mean(grads, 0), (thetas[s] - x) / (eta * k))  # line 6
    s_t = len(arrived)
    diff = sum(arrived[i][0] - c_i[i] for i in arrived)
    g = beta * (diff / s_t + c) + (1 - beta) * g  # Alg. 1 line 5 / Alg. 3 line 7
    step = np.mean([d for _, d in arrived.values()], 0) if adaptive else g
    thetas.append(thetas[-1] - gamma * step)  # Alg. 1 line 6 / Alg. 3 line 6
    c = c + diff / n  # Alg. 1 line 7 / Alg. 3 line 8
    for i, (ct, _) in arrived.items():
      c_i[i] = ct
      sent[i].append((t, ct))
    directions.append(beta * c + (1 - beta) * g)  # Alg. 1 line 8
  return np.stack(thetas[1:])


# Client 0 has two jobs in flight: B (start 1) arrives at step 1 before A (start 0)
# arrives at step 2, so A must still use c_0^0; C (start 2) uses B's variate, not A's.
OVERLAP = dict(
  client_ids=[[1, 0], [0, 0], [0, 0], [0, 0], [2, 0]],
  start_step=[[0, 0], [1, 0], [0, 0], [2, 0], [0, 4]],
  mask=[[1, 0], [1, 0], [1, 0], [1, 0], [1, 1]],
  local_steps=2,
  num_clients=3,
)


@pytest.mark.parametrize(
  'name,dtype,tol,overlap',
  [
    ('masfl', np.float64, 1e-10, False),
    ('adamasfl', np.float64, 1e-10, False),
    ('masfl', np.float32, 1e-5, False),
    ('masfl', np.float64, 1e-10, True),
    ('adamasfl', np.float64, 1e-10, True),
  ],
)
def test_replay_matches_numpy(name, dtype, tol, overlap):
  """quadratic.stale_schedule, or jobs of one client overlapping so that only the causal
  variate c~_i is right."""
  with jax.enable_x64(dtype == np.float64):
    a, b = make_quadratic(dtype=dtype)
    x0 = np.linspace(-1, 1, 4).astype(dtype)
    sched = afl_jax.schedules.from_arrays(**OVERLAP) if overlap else stale_schedule()
    assert history_depth(sched) == (2 if overlap else 3)
    res = simulate_quadratic(name, a, b, x0, sched, client_lr=0.3, server_lr=0.4, beta=0.7)
    want = np_masfl(sched, a, b, x0, 0.3, 0.4, 0.7, name == 'adamasfl')
    assert res.params_history['x'].dtype == dtype
    np.testing.assert_allclose(res.params_history['x'], want, rtol=tol, atol=tol)


@pytest.mark.parametrize('name,selection', [('masfl', 'arrivals'), ('adamasfl', 'uniform')])
def test_control_variate_is_mean_of_client_variates_after_every_step(name, selection):
  """Alg. 1 line 7 keeps c^t = (1/N) sum_i c_i^t; checked after each server step."""
  problem = logistic_problem(6, 16, 3)
  sched = afl_jax.schedules.fedbuff(6, 3, 2, 8, local_steps=3, seed=2)
  alg = afl_jax.algorithms.make(name, client_lr=0.2, server_lr=0.5, beta=0.6, selection=selection)
  sim = afl_jax.Simulator(alg, problem, sched, chunk_size=1)
  key = jax.random.key(1)
  state = sim.init({'w': jnp.zeros(3), 'b': jnp.zeros(())}, key)
  steps, moved = 0, 0
  while sim.position(state) < sched.num_steps:
    before = np.asarray(state.server.variates['w']).copy()
    state, _ = sim.run_chunk(state, key)
    server = jax.device_get(state.server)
    for leaf in ('w', 'b'):
      np.testing.assert_allclose(
        server.control[leaf], server.variates[leaf].mean(0), rtol=1e-5, atol=1e-6
      )
    moved += int(not np.array_equal(before, server.variates['w']))
    steps += 1
  assert steps == 8 and moved >= 4  # the variates really change along the run


def test_beta_one_k_one_full_fresh_participation_is_gradient_descent(x64):
  """beta=1, K=1, S_t = all N, no delay: g^{t+1} = c^{t+1} = grad f(theta^t)."""
  a, b = make_quadratic(num_clients=4, dtype=np.float64)
  t_steps, gamma = 6, 0.3
  sched = fresh_schedule(4, t_steps, local_steps=1)
  # client_lr plays no role with K=1 (only the gradient at theta^t is used).
  res = simulate_quadratic(
    'masfl', a, b, np.ones(4), sched, client_lr=5.0, server_lr=gamma, beta=1.0
  )
  x = np.ones(4)
  for t in range(t_steps):
    x = x - gamma * np.mean([np_grad(a[i], b[i], x) for i in range(4)], 0)
    np.testing.assert_allclose(res.params_history['x'][t], x, rtol=1e-12, atol=1e-12)


def test_adamasfl_global_step_is_at_most_gamma_and_finite():
  """||gamma mean(Delta)|| <= gamma every step, even with steep gradients (Sec. 4.1)."""
  a, b = make_quadratic()
  a = 30.0 * a  # plain steps of size eta * ||g|| would be far larger than eta
  gamma = 0.05
  x0 = np.linspace(-1, 1, 4).astype(np.float32)
  res = simulate_quadratic(
    'adamasfl', a, b, x0, stale_schedule(), client_lr=0.4, server_lr=gamma, beta=0.5
  )
  path = np.concatenate([x0[None], np.asarray(res.params_history['x'])])
  steps = np.linalg.norm(np.diff(path, axis=0), axis=1)
  assert np.isfinite(path).all()
  assert (steps <= gamma * (1 + 1e-5)).all(), steps
  assert steps.max() > 0.5 * gamma  # the bound is not trivially met by tiny steps


def test_adamasfl_zero_gradient_takes_no_step_and_no_nan():
  def flat_loss(params, batch):
    return 0.0 * jnp.sum(params['x']) + 0.0 * jnp.sum(batch['b'])

  a, b = make_quadratic()
  problem = afl_jax.problems.from_loss(flat_loss, {'a': jnp.asarray(a), 'b': jnp.asarray(b)})
  alg = afl_jax.algorithms.make('adamasfl', client_lr=0.5, server_lr=0.5, beta=0.5)
  x0 = jnp.asarray([1.0, -2.0, 3.0, 0.5])
  res = afl_jax.simulate(alg, problem, stale_schedule(), {'x': x0}, jax.random.key(0))
  assert np.isfinite(res.params_history['x']).all()
  np.testing.assert_array_equal(res.params_history['x'], np.tile(x0, (6, 1)))
  assert np.isfinite(jax.device_get(res.final_state.server.momentum['x'])).all()


def test_registry_fills_theory_rates_from_s_k_t(x64):
  """AdaMasFL's Thm 4.1 and MasFL's Thm 3.1 rates are the defaults given S, K, T (L, tau)."""
  a, b, x0, sched = stale_setup()
  s, k, t = 2, 2, 40
  run = lambda name, **hp: simulate_quadratic(name, a, b, x0, sched, **hp).params_history['x']
  got = run('adamasfl', arrivals_per_step=s, local_steps=k, num_rounds=t)
  want = np_masfl(
    sched, a, b, x0, 1 / (k * math.sqrt(t)), (s * k) ** 0.25 / t**0.75, math.sqrt(s * k / t), True
  )
  np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
  lips, tau, t = 3.0, 3, 400
  got = run('masfl', arrivals_per_step=s, local_steps=k, num_rounds=t, smoothness=lips, tau_max=tau)
  beta = math.sqrt(s * k / t)
  eta = math.sqrt(t - math.sqrt(s * k * t) - 4 * s * k * tau**2) / (
    4 * math.sqrt(5) * math.e * k * lips * math.sqrt(t)
  )
  want = np_masfl(sched, a, b, x0, eta, beta / (4 * lips), beta, False)
  np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_history_depth_counts_own_arrivals_while_a_job_is_in_flight():
  depth = history_depth
  no_overlap = afl_jax.schedules.from_arrays([[0], [0], [1]], [[0], [1], [0]], num_clients=2)
  assert depth(no_overlap) == 1
  # Client 0's job from version 0 arrives at step 3 after its arrivals at steps 0, 1, 2.
  three = afl_jax.schedules.from_arrays([[0], [0], [0], [0]], [[0], [0], [1], [0]])
  assert depth(three) == 4
  assert depth([no_overlap, three]) == 4  # a sweep's replicas share one program
  sched = afl_jax.schedules.random_staleness(6, 3, 20, window=4, local_steps=2, seed=0)
  assert depth(sched) >= 2  # afl_jax's own schedules overlap one client's jobs
