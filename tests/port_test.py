"""Port (Su & Li, IWQoS 2022) against NumPy loops of docs/algorithms/port.md's equations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import (
  arrivals_at,
  check_empty_step_and_exact_zeros,
  check_fresh_is_fedbuff,
  np_local_gd,
  quadratic_problem,
  simulate_quadratic,
  stale_setup,
)

import afl_jax
from afl_jax.schedules.durations import Durations

# quadratic.stale_schedule has staleness up to 3 (so the similarity term is used), one
# padding slot, and client 0 with two jobs in flight.
HP = dict(
  client_lr=0.3, server_lr=0.8, similarity_weight=1.0, staleness_weight=3.0, staleness_bound=2.0
)


def _np_port(schedule, a, b, x0, *, reference='last_step', sizes=None, **hp):
  client_lr, server_lr, similarity_weight, staleness_weight, staleness_bound = (
    hp.pop(k) for k in HP
  )
  assert not hp, hp
  xs, prev = [np.array(x0, np.float64)], np.array(x0, np.float64)
  for t in range(schedule.num_steps):
    x = xs[t]
    raw, ds = [], []
    for i, s, k in arrivals_at(schedule, t):
      tau = t - s
      d = np_local_gd(a[i], b[i], xs[s], client_lr, k) - x  # x_i - x_t
      u = x - prev if reference == 'last_step' else x - xs[s]
      nu, nd = np.linalg.norm(u), np.linalg.norm(d)
      cos = u @ d / (nu * nd) if nu > 0 and nd > 0 else 0.0
      rho = cos if tau > 1 else 1.0
      n_i = 1.0 if sizes is None else sizes[i]
      staleness_term = staleness_weight * staleness_bound / (tau + staleness_bound)
      raw.append(n_i * (similarity_weight * (rho + 1) / 2 + staleness_term))
      ds.append(d)
    if not ds:  # an empty step changes nothing
      xs.append(x)
      continue
    raw = np.array(raw)
    p = raw / raw.sum() if raw.sum() > 0 else np.full(len(raw), 1.0 / len(raw))
    xs.append(x + server_lr * sum(pi * d for pi, d in zip(p, ds)))
    prev = x
  return np.stack(xs[1:])


def _run(schedule, a, b, x0, name='port', **hp):
  return simulate_quadratic(name, a, b, x0, schedule, **hp).params_history['x']


@pytest.mark.parametrize('reference', ['last_step', 'start'])
def test_port_matches_numpy_over_stale_schedule(reference, x64):
  a, b, x0, sched = stale_setup()
  got = _run(sched, a, b, x0, reference=reference, **HP)
  want = _np_port(sched, a, b, x0, reference=reference, **HP)
  np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
  # n_i from the problem (examples per client, carried by each message), as the
  # authors weight clients.
  sizes = np.array([10, 40, 25])
  problem = quadratic_problem(a, b).replace(client_sizes=sizes)
  port = afl_jax.algorithms.make('port', reference=reference, **HP)
  got_n = afl_jax.simulate(port, problem, sched, {'x': jnp.asarray(x0)}, jax.random.key(0))
  got_n = got_n.params_history['x']
  want_n = _np_port(sched, a, b, x0, reference=reference, sizes=sizes, **HP)
  np.testing.assert_allclose(got_n, want_n, rtol=1e-10, atol=1e-10)
  assert np.max(np.abs(want_n - want)) > 1e-4
  # Each term matters on this schedule (a wrong reference or weight would be seen).
  other = 'start' if reference == 'last_step' else 'last_step'
  assert np.max(np.abs(want - _np_port(sched, a, b, x0, reference=other, **HP))) > 1e-4
  no_sim = dict(HP, similarity_weight=0.0)
  assert np.max(np.abs(want - _np_port(sched, a, b, x0, reference=reference, **no_sim))) > 1e-4


@pytest.mark.parametrize('weights', [dict(similarity_weight=0.0), dict(staleness_weight=0.0)])
def test_port_fresh_arrivals_with_one_term_is_fedbuff(weights, x64):
  # Fresh arrivals (tau = 0) all get the same weight, so Port is FedBuff at rate eta.
  check_fresh_is_fedbuff('port', 4, **weights)


def test_port_empty_step_and_exact_zeros(x64):
  check_empty_step_and_exact_zeros('port', _np_port, **HP)


def test_port_clock_by_hand():
  # Client 0's jobs take 1 s, client 1's 2.5 s; M = 1, B = 1, K = 10. At t = 2 s the
  # job of client 1 (started from version 0) would be too stale for step 2.
  d = Durations('constant', {'value': 1.0}, speed=np.array([1.0, 2.5]))
  urgent = afl_jax.schedules.fedbuff(
    2, 2, 1, 3, staleness_bound=1, urgent=True, durations=d, local_steps=10
  )
  wait = afl_jax.schedules.fedbuff(
    2, 2, 1, 3, staleness_bound=1, urgent=False, durations=d, local_steps=10
  )
  for s in (urgent, wait):
    np.testing.assert_array_equal(s.client_ids[s.mask], [0, 0, 1, 0])
    np.testing.assert_array_equal(s.start_step[s.mask], [0, 1, 0, 2])
  # Urgent: client 1 reports at 2 s with floor(10 * 2 / 2.5) = 8 of its 10 steps.
  np.testing.assert_array_equal(urgent.local_steps[urgent.mask], [10, 10, 8, 10])
  np.testing.assert_allclose(urgent.wall_clock, [1.0, 2.0, 3.0])
  # Non-urgent: the server waits for it until 2.5 s; it runs all 10 steps.
  np.testing.assert_array_equal(wait.local_steps[wait.mask], [10, 10, 10, 10])
  np.testing.assert_allclose(wait.wall_clock, [1.0, 2.5, 3.5])


@pytest.mark.parametrize('urgent', [False, True])
def test_port_clock_bounds_staleness_and_is_fedbuff_when_loose(urgent):
  fb = afl_jax.schedules.fedbuff(20, 8, 3, 60, local_steps=4, seed=1)
  tau_fb = (np.arange(60)[:, None] - fb.start_step)[fb.mask]
  assert tau_fb.max() > 2  # FedBuff's clock alone exceeds the bounds below
  loose = afl_jax.schedules.fedbuff(
    20, 8, 3, 60, staleness_bound=int(tau_fb.max()), urgent=urgent, local_steps=4, seed=1
  )
  for field in ('client_ids', 'start_step', 'local_steps', 'mask', 'wall_clock'):
    np.testing.assert_array_equal(getattr(loose, field), getattr(fb, field))
  for bound in (0, 1, 2):
    s = afl_jax.schedules.fedbuff(
      20, 8, 3, 60, staleness_bound=bound, urgent=urgent, local_steps=4, seed=1
    )
    tau = (np.arange(60)[:, None] - s.start_step)[s.mask]
    assert tau.max() <= bound and np.all(np.diff(s.wall_clock) >= 0)
    assert np.all(s.mask.sum(1) >= 3)
    ks = s.local_steps[s.mask]
    if urgent:  # stale jobs are cut short rather than waited for
      assert ks.min() < 4 and np.all(ks >= 1)
    else:  # full jobs, more than M arrivals at the steps that waited
      assert np.all(ks == 4) and s.mask.sum(1).max() > 3
