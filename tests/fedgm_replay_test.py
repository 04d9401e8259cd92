"""Sun et al.'s eq. (2), Alg. 3, Alg. 4 and FedOPT's Adam through the engine, against NumPy."""

import jax
import numpy as np
import pytest
from quadratic import (
  arrivals_at,
  make_quadratic,
  np_local_gd,
  simulate_quadratic,
  stale_schedule,
  stale_setup,
)

import afl_jax

CLIENT_LR = 0.3


def _stages(lengths, etas, betas, nus):
  """The Multistage / Autonomous FedGM hyperparameters of stages of ``lengths`` steps."""
  return dict(stage_lengths=lengths, server_lrs=etas, betas=betas, nus=nus)


def _fresh_schedule(steps, k):
  """Zero staleness, two of three clients per step, K_{t,i} = k."""
  ids = [[t % 3, (t + 1) % 3] for t in range(steps)]
  start = [[t, t] for t in range(steps)]
  return afl_jax.schedules.from_arrays(ids, start, local_steps=k)


def _mean_deltas(schedule, a, b, history, t, client_lr, normalize):
  deltas = []
  for i, s, k in arrivals_at(schedule, t):
    delta = history[s] - np_local_gd(a[i], b[i], history[s], client_lr, k)
    deltas.append(delta / k if normalize else delta)
  return np.mean(deltas, axis=0)


def np_fedgm(schedule, a, b, x0, client_lr, hparams_at, normalize=False):
  """Alg. 3 / Alg. 4 server loop; ``hparams_at(t) -> (eta, beta, nu)``; d_0 = 0.

  history[s] is the broadcast before step s; ``normalize`` divides each client's
  update by its K_{t,i} (Alg. 4 line 7).
  """
  history = [np.array(x0, np.float64)]
  d = np.zeros_like(history[0])
  for t in range(schedule.num_steps):
    delta = _mean_deltas(schedule, a, b, history, t, client_lr, normalize)
    eta, beta, nu = hparams_at(t)
    d = (1 - beta) * delta + beta * d
    h = (1 - nu) * delta + nu * d
    history.append(history[t] - eta * h)
  return np.stack(history[1:])


@pytest.mark.parametrize(
  'eta,beta,nu,dtype,tol',
  [
    (1.0, 0.9, 0.7, np.float64, 1e-10),
    (0.6, 0.3, 0.95, np.float64, 1e-10),
    (0.8, 0.6, 0.5, np.float32, 1e-5),
  ],
)
def test_fedgm_replay_matches_numpy(eta, beta, nu, dtype, tol):
  with jax.enable_x64(dtype == np.float64):
    a, b = make_quadratic(dtype=dtype)
    x0, sched = np.linspace(-1, 1, 4).astype(dtype), stale_schedule()
    res = simulate_quadratic(
      'fedgm', a, b, x0, sched, client_lr=CLIENT_LR, server_lr=eta, beta=beta, nu=nu
    )
    expected = np_fedgm(sched, a, b, x0, CLIENT_LR, lambda t: (eta, beta, nu))
    assert res.params_history['x'].dtype == dtype
    assert res.metrics['server/beta'].dtype == dtype
    np.testing.assert_allclose(res.params_history['x'], expected, rtol=tol, atol=tol)


def test_nu_zero_eta_one_is_fedavg(x64):
  a, b = make_quadratic(dtype=np.float64)
  sched = _fresh_schedule(5, k=2)
  x0 = np.zeros(4)
  # beta is irrelevant when nu = 0; a large one makes a leak of d visible.
  gm = simulate_quadratic('fedgm', a, b, x0, sched, client_lr=0.2, server_lr=1.0, beta=0.9, nu=0.0)
  avg = simulate_quadratic('fedavg', a, b, x0, sched, client_lr=0.2, weighting='uniform')
  x = x0  # FedAvg by definition: the mean of the client models trained from x_t.
  for t in range(sched.num_steps):
    x = np.mean([np_local_gd(a[i], b[i], x, 0.2, 2) for i in sched.client_ids[t]], axis=0)
    np.testing.assert_allclose(gm.params_history['x'][t], x, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(
    gm.params_history['x'], avg.params_history['x'], rtol=1e-12, atol=1e-12
  )


def test_two_stage_run_switches_exactly_at_the_boundary(x64):
  etas, betas, nus = (1.2, 0.4), (0.5, 0.85), (0.3, 0.9)
  a, b, x0, sched = stale_setup()
  stages = _stages((2, 4), etas, betas, nus)
  res = simulate_quadratic('multistage_fedgm', a, b, x0, sched, client_lr=CLIENT_LR, **stages)
  stage = np.array([0, 0, 1, 1, 1, 1])  # 0-based rounds: stage 1 is steps {0, 1}
  for name, values in (('server_lr', etas), ('beta', betas), ('nu', nus)):
    np.testing.assert_array_equal(res.metrics[f'server/{name}'], np.asarray(values)[stage])
  at = lambda boundary: (
    lambda t: (etas[0], betas[0], nus[0]) if t < boundary else (etas[1], betas[1], nus[1])
  )
  got = res.params_history['x']
  np.testing.assert_allclose(
    got, np_fedgm(sched, a, b, x0, CLIENT_LR, at(2)), rtol=1e-10, atol=1e-10
  )
  for wrong in (1, 3):  # a boundary off by one either way must be detected
    assert not np.allclose(got, np_fedgm(sched, a, b, x0, CLIENT_LR, at(wrong)), atol=1e-6)


def test_autonomous_with_constant_k_and_no_delay_is_multistage_at_eta_over_k(x64):
  k, lengths, etas, betas, nus = 3, (2, 3), (2.0, 1.0), (0.7, 0.9), (0.5, 0.9)
  a, b = make_quadratic(dtype=np.float64)
  sched, x0 = _fresh_schedule(5, k), np.linspace(1, -1, 4)
  run = lambda name, server_lrs: simulate_quadratic(
    name, a, b, x0, sched, client_lr=0.1, **_stages(lengths, server_lrs, betas, nus)
  ).params_history['x']
  auto = run('autonomous_fedgm', etas)
  multi = run('multistage_fedgm', tuple(e / k for e in etas))
  np.testing.assert_allclose(auto, multi, rtol=1e-12, atol=1e-12)
  undivided = run('multistage_fedgm', etas)
  assert not np.allclose(auto, undivided, atol=1e-3)


def test_autonomous_with_random_staleness_and_epochs_matches_numpy(x64):
  """App. H.1 schedule: start version from the last 3, K_{t,i} = 2 * e, e in {1, 2, 3}."""
  etas, betas, nus, lengths = (1.5, 0.5), (0.6, 0.9), (0.7, 0.9), (4, 4)
  a, b = make_quadratic(dtype=np.float64)
  sched = afl_jax.schedules.random_staleness(
    3, 2, 8, window=3, local_steps=2, local_steps_multipliers=range(1, 4), seed=3
  )
  assert sched.max_staleness >= 1 and len(np.unique(sched.local_steps)) > 1
  x0 = np.linspace(-1, 1, 4)
  stages = _stages(lengths, etas, betas, nus)
  res = simulate_quadratic('autonomous_fedgm', a, b, x0, sched, client_lr=0.2, **stages)
  at = lambda t: (etas[t >= 4], betas[t >= 4], nus[t >= 4])
  expected = np_fedgm(sched, a, b, x0, 0.2, at, normalize=True)
  np.testing.assert_allclose(res.params_history['x'], expected, rtol=1e-10, atol=1e-10)
  # Alg. 4 with one stage, by its own name and FedGM's hyperparameters.
  assert afl_jax.algorithms.settings('autonomous_fedgm_single_stage') == (
    afl_jax.algorithms.settings('fedgm')
  )
  hp = dict(server_lr=etas[0], beta=betas[0], nu=nus[0])
  one = simulate_quadratic('autonomous_fedgm_single_stage', a, b, x0, sched, client_lr=0.2, **hp)
  expected = np_fedgm(sched, a, b, x0, 0.2, lambda t: tuple(hp.values()), normalize=True)
  np.testing.assert_allclose(one.params_history['x'], expected, rtol=1e-10, atol=1e-10)


def test_fedopt_default_is_numpy_adam_for_three_steps(x64):
  eta, b1, b2, tau = 0.05, 0.9, 0.99, 1e-3
  a, b = make_quadratic(dtype=np.float64)
  sched, x0 = _fresh_schedule(3, k=2), np.linspace(-1, 1, 4)
  # FedOPT's defaults: Adam, beta1 = 0.9, beta2 = 0.99, tau = 1e-3 (optax's convention).
  res = simulate_quadratic('fedopt', a, b, x0, sched, client_lr=0.2, server_lr=eta)
  history, m, v = [x0], np.zeros(4), np.zeros(4)
  for t in range(3):  # Kingma & Ba's Adam on the mean pseudo-gradient Delta_t
    g = _mean_deltas(sched, a, b, history, t, 0.2, normalize=False)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1 ** (t + 1)), v / (1 - b2 ** (t + 1))
    history.append(history[t] - eta * m_hat / (np.sqrt(v_hat) + tau))
  np.testing.assert_allclose(res.params_history['x'], np.stack(history[1:]), rtol=1e-10, atol=1e-10)
