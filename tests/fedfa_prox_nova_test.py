"""FedProx (Li et al., 2020) and FedNova (Wang et al., 2020) as used by FedFa, vs NumPy.

FedProx: local GD on ``F_i(x) + mu/2 ||x - x_start||^2``. FedNova with plain SGD:
``x <- x - eta_g * tau_eff * mean_i(Delta_i / tau_i)``, ``tau_eff = mean_i tau_i``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import (
  fresh_schedule,
  make_quadratic,
  np_local_gd,
  np_replay,
  quadratic_task,
  simulate_quadratic,
  stale_schedule,
)
from same import assert_close_ulps

import afl_jax

LR = 0.3


def np_prox_gd(a_i, b_i, x0, lr, mu, k):
  """K steps of GD on 0.5||A x - b||^2 + mu/2 ||x - x0||^2 (FedProx's h_k)."""
  x = np.array(x0, np.float64)
  for _ in range(k):
    x = x - lr * (a_i.T @ (a_i @ x - b_i) + mu * (x - x0))
  return x


def _client_message(rule, a, b, i, x0, num_steps, max_steps=5):
  task = quadratic_task(a[i], b[i], num_steps, max_steps, client_id=i)
  start = {'x': jnp.asarray(x0)}
  state = rule.init(start, task, jax.random.key(0))
  msg, _, metrics = jax.jit(rule.update)(start, state, task, jax.random.key(1))
  return np.asarray(msg['x']), metrics


def test_prox_mu_zero_is_local_sgd_under_jit(x64):
  a, b = make_quadratic(dtype=np.float64)
  x0 = np.linspace(-1, 1, 4)
  prox, _ = _client_message(afl_jax.clients.prox_sgd(LR, 0.0), a, b, 1, x0, 3)
  sgd, _ = _client_message(afl_jax.clients.local_sgd(LR), a, b, 1, x0, 3)
  np.testing.assert_allclose(prox, x0 - np_local_gd(a[1], b[1], x0, LR, 3), atol=1e-12)
  # mu * (x - x0) is zero, but it is another program (XLA may fuse it differently): ulps.
  assert_close_ulps(prox, sgd)


@pytest.mark.parametrize('num_steps', [1, 4])
def test_prox_one_job_matches_numpy_prox_gd(num_steps, x64):
  a, b = make_quadratic(dtype=np.float64)
  x0 = np.linspace(1, -1, 4)
  msg, metrics = _client_message(afl_jax.clients.prox_sgd(LR, 0.7), a, b, 2, x0, num_steps)
  expected = x0 - np_prox_gd(a[2], b[2], x0, LR, 0.7, num_steps)  # Delta = start - local
  np.testing.assert_allclose(msg, expected, atol=1e-12, rtol=1e-12)
  if num_steps > 1:  # the proximal term changed the iterate
    assert not np.allclose(msg, x0 - np_local_gd(a[2], b[2], x0, LR, num_steps))
  assert np.isfinite(float(metrics['train_loss']))


def _sync_schedule(steps):
  return fresh_schedule(3, len(steps), steps)


def _run(name, schedule, x0, **hp):
  a, b = make_quadratic(dtype=np.float64)
  res = simulate_quadratic(name, a, b, np.asarray(x0, np.float64), schedule, **hp)
  return a, b, np.asarray(res.params_history['x'])


def np_replay_with(schedule, x0, local_fn, server_step):
  """Like quadratic.np_replay, but passes local steps and lets the client solver vary."""
  history = [np.array(x0, np.float64)]
  for t in range(schedule.num_steps):
    rows = []
    for j in range(schedule.max_arrivals):
      if schedule.mask[t, j]:
        i, s, k = schedule.client_ids[t, j], schedule.start_step[t, j], schedule.local_steps[t, j]
        rows.append((local_fn(i, history[s], k), history[s], k))
    history.append(server_step(history[t], rows))
  return np.stack(history[1:])


def _nova_step(eta_g):
  def step(x, rows):
    tau_eff = np.mean([k for _, _, k in rows])
    d = np.mean([(start - local) / k for local, start, k in rows], axis=0)
    return x - eta_g * tau_eff * d

  return step


def test_fedprox_mu_zero_is_fedavg(x64):
  sched = _sync_schedule([[2, 3, 1]] * 4)
  x0 = np.linspace(-1, 1, 4)
  a, b, prox = _run('fedprox', sched, x0, client_lr=LR, mu=0.0, weighting='uniform')
  _, _, avg = _run('fedavg', sched, x0, client_lr=LR, weighting='uniform')
  expected = np_replay(sched, a, b, x0, LR, lambda x, loc, st, tau: np.mean(loc, axis=0))
  np.testing.assert_allclose(prox, expected, atol=1e-12)
  # The proximal term is zero at mu = 0, but FedProx is another program: 4 ulps per step.
  assert_close_ulps(prox, avg, ulps=4 * len(prox))


def test_fedbuff_prox_stale_matches_numpy(x64):
  sched = stale_schedule()
  x0 = np.linspace(-1, 1, 4)
  a, b, got = _run('fedbuff_prox', sched, x0, client_lr=LR, server_lr=0.7, mu=0.5)
  expected = np_replay_with(
    sched,
    x0,
    lambda i, x, k: np_prox_gd(a[i], b[i], x, LR, 0.5, k),
    lambda x, rows: x + 0.7 * np.mean([loc - st for loc, st, _ in rows], axis=0),
  )
  np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)


def test_fednova_equal_steps_is_fedavg(x64):
  sched = _sync_schedule([[3, 3, 3]] * 4)
  x0 = np.linspace(-1, 1, 4)
  a, b, nova = _run('fednova', sched, x0, client_lr=LR, weighting='uniform')
  _, _, avg = _run('fedavg', sched, x0, client_lr=LR, weighting='uniform')
  expected = np_replay(sched, a, b, x0, LR, lambda x, loc, st, tau: np.mean(loc, axis=0))
  np.testing.assert_allclose(nova, expected, atol=1e-12)
  np.testing.assert_allclose(nova, avg, atol=1e-12)


def test_fednova_unequal_steps_matches_numpy(x64):
  sched = _sync_schedule([[1, 2, 4], [3, 1, 2], [4, 4, 1], [2, 1, 3]])
  x0 = np.linspace(-1, 1, 4)
  a, b, got = _run('fednova', sched, x0, client_lr=LR, weighting='uniform')
  local = lambda i, x, k: np_local_gd(a[i], b[i], x, LR, k)
  expected = np_replay_with(sched, x0, local, _nova_step(1.0))
  np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)
  avg = np_replay(sched, a, b, x0, LR, lambda x, loc, st, tau: np.mean(loc, axis=0))
  assert not np.allclose(expected, avg)  # unequal steps: FedNova differs from FedAvg


def test_fedbuff_nova_stale_unequal_steps_matches_numpy(x64):
  sched = stale_schedule()
  x0 = np.linspace(1, -1, 4)
  a, b, got = _run('fedbuff_nova', sched, x0, client_lr=LR, server_lr=0.6)
  local = lambda i, x, k: np_local_gd(a[i], b[i], x, LR, k)
  expected = np_replay_with(sched, x0, local, _nova_step(0.6))
  np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)


def test_fedbuff_nova_equal_steps_is_fedbuff(x64):
  sched = stale_schedule(local_steps=2)
  x0 = np.linspace(1, -1, 4)
  _, _, nova = _run('fedbuff_nova', sched, x0, client_lr=LR, server_lr=0.6)
  _, _, buff = _run('fedbuff', sched, x0, client_lr=LR, server_lr=0.6)
  np.testing.assert_allclose(nova, buff, atol=1e-12)


def test_fedfa_delta_prox_matches_numpy(x64):
  # FedFa-Delta (K = 2) with the proximal client on a fully asynchronous, stale schedule.
  ids, start, steps = [0, 1, 2, 0, 2, 1, 0], [0, 0, 1, 2, 2, 4, 3], [2, 1, 3, 1, 2, 2, 3]
  col = lambda z: np.asarray(z)[:, None]
  sched = afl_jax.schedules.from_arrays(col(ids), col(start), local_steps=col(steps))
  x0 = np.linspace(-1, 1, 4)
  a, b, got = _run(
    'fedfa_delta_prox', sched, x0, client_lr=LR, server_lr=0.9, mu=0.4, window_size=2
  )
  history, window, x = [x0], [], x0
  for t in range(len(ids)):
    s = history[start[t]]
    window = (window + [np_prox_gd(a[ids[t]], b[ids[t]], s, LR, 0.4, steps[t]) - s])[-2:]
    if t >= 2:  # arrivals 0 and 1 fill the window
      x = x + 0.9 / 2 * np.sum(window, axis=0)
    history.append(x)
  np.testing.assert_allclose(got, np.stack(history[1:]), atol=1e-12, rtol=1e-12)


def test_nova_scales_closed_form():
  scales = afl_jax.servers.nova_scales(jnp.array([1, 2, 4, 7]), jnp.array([1, 1, 1, 0], bool))
  np.testing.assert_allclose(scales, [7 / 3, 7 / 6, 7 / 12, 0.0], rtol=1e-6)
