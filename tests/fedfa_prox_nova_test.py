"""FedProx (Li et al., 2020) and FedNova (Wang et al., 2020: ``x <- x - eta_g tau_eff
mean_i(Delta_i / tau_i)``) against NumPy."""

import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import (
  arrivals_at,
  fresh_schedule,
  make_quadratic,
  np_local_gd,
  simulate_quadratic,
  stale_schedule,
)
from same import assert_close_ulps

import afl_jax

LR = 0.3
UNEQUAL = [[1, 2, 4], [3, 1, 2], [4, 4, 1], [2, 1, 3]]  # K per client and step, synchronous


def np_replay_steps(schedule, a, b, x0, server_step, mu=0.0):
  """quadratic.np_replay whose ``server_step(x, rows)`` gets (local, start, K) per arrival."""
  history = [np.array(x0, np.float64)]
  for t in range(schedule.num_steps):
    rows = [
      (np_local_gd(a[i], b[i], history[s], LR, k, mu), history[s], k)
      for i, s, k in arrivals_at(schedule, t)
    ]
    history.append(server_step(history[t], rows))
  return np.stack(history[1:])


def _mean(x, rows):  # FedAvg, uniform: the mean of the client models
  return np.mean([local for local, _, _ in rows], axis=0)


def _buff(eta_g):  # FedBuff: x + eta_g * mean(x_local - x_start)
  return lambda x, rows: x + eta_g * np.mean([loc - st for loc, st, _ in rows], axis=0)


def _nova(eta_g):
  def step(x, rows):
    tau_eff = np.mean([k for _, _, k in rows])
    d = np.mean([(start - local) / k for local, start, k in rows], axis=0)
    return x - eta_g * tau_eff * d

  return step


def _run(name, schedule, x0, **hp):
  a, b = make_quadratic(dtype=np.float64)
  res = simulate_quadratic(name, a, b, np.asarray(x0, np.float64), schedule, **hp)
  return a, b, np.asarray(res.params_history['x'])


@pytest.mark.parametrize(
  'name, hp, stale, step, mu, base',
  [
    ('fedprox', dict(mu=0.5, weighting='uniform'), False, _mean, 0.5, _mean),
    ('fedbuff_prox', dict(server_lr=0.7, mu=0.5), True, _buff(0.7), 0.5, _buff(0.7)),
    ('fednova', dict(weighting='uniform'), False, _nova(1.0), 0.0, _mean),
    ('fedbuff_nova', dict(server_lr=0.6), True, _nova(0.6), 0.0, _buff(0.6)),
  ],
)
def test_prox_and_nova_match_numpy(name, hp, stale, step, mu, base, x64):
  """Unequal local steps (stale: quadratic.stale_schedule); each term changes the run."""
  sched = stale_schedule() if stale else fresh_schedule(3, 4, UNEQUAL)
  x0 = np.linspace(-1, 1, 4)
  a, b, got = _run(name, sched, x0, client_lr=LR, **hp)
  expected = np_replay_steps(sched, a, b, x0, step, mu)
  np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)
  assert not np.allclose(expected, np_replay_steps(sched, a, b, x0, base))


@pytest.mark.parametrize(
  'name, base, hp, schedule',
  [
    ('fedprox', 'fedavg', dict(mu=0.0, weighting='uniform'), fresh_schedule(3, 4, UNEQUAL)),
    ('fednova', 'fedavg', dict(weighting='uniform'), fresh_schedule(3, 4, 3)),
    ('fedbuff_nova', 'fedbuff', dict(server_lr=0.6), stale_schedule(local_steps=2)),
    ('fedfa_param_nova', 'fedfa_param', dict(window_size=3), stale_schedule(local_steps=2)),
    ('fedfa_delta_nova', 'fedfa_delta', dict(window_size=3), stale_schedule(local_steps=2)),
  ],
)
def test_mu_zero_or_equal_steps_is_the_base_algorithm(name, base, hp, schedule, x64):
  """FedProx at mu = 0 and FedNova at equal K are their base rule; each is another program
  (a zero proximal term, K / K factors), so 4 ulps of the values' scale per step."""
  x0 = np.linspace(1, -1, 4)
  _, _, got = _run(name, schedule, x0, client_lr=LR, **hp)
  _, _, want = _run(base, schedule, x0, client_lr=LR, **{k: v for k, v in hp.items() if k != 'mu'})
  assert_close_ulps(got, want, ulps=4 * len(want))


def test_nova_scales_closed_form():
  scales = afl_jax.servers.nova_scales(jnp.array([1, 2, 4, 7]), jnp.array([1, 1, 1, 0], bool))
  np.testing.assert_allclose(scales, [7 / 3, 7 / 6, 7 / 12, 0.0], rtol=1e-6)
