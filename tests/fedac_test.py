"""FedAC (Zang et al., AAAI 2024) against NumPy loops of docs/algorithms/fedac.md's equations."""

import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import (
  arrivals_at,
  check_empty_step_and_exact_zeros,
  fresh_schedule,
  make_quadratic,
  np_grad,
  np_local_gd,
  simulate_quadratic,
  stale_schedule,
  stale_setup,
)

import afl_jax

HP = dict(client_lr=0.3, server_lr=0.5, beta1=0.6, beta2=0.9, epsilon=1e-3)


def _np_fedac(schedule, a, b, x0, *, history=None, correction=True, latest=False, **hp):
  """Replay FedAC with HP's settings in ``hp``. ``history=None``: unbounded (exact causal
  variates)."""
  client_lr, server_lr, beta1, beta2, epsilon = (hp.pop(k) for k in HP)
  min_similarity = hp.pop('min_similarity', 0.0)
  zero_cosine, first_update = hp.pop('zero_cosine', 1.0), hp.pop('first_update', 'movement')
  assert not hp, hp
  n = a.shape[0]
  xs, cs = [np.array(x0, np.float64)], [np.zeros_like(x0, dtype=np.float64)]
  applied = [np.zeros(n, int)]  # applied[s][i]: jobs of i applied before version s
  jobs = [[] for _ in range(n)]  # variates of each client's arrived jobs, in order
  m = v = np.zeros_like(xs[0])
  evicted = []
  for t in range(schedule.num_steps):
    x, c = xs[t], cs[t]
    ids, deltas, dcs, cplus, starts, ev = [], [], [], [], [], 0.0
    for i, s, k in arrivals_at(schedule, t):
      want = applied[s][i]  # the latest job of i applied before it started
      if history is not None and 0 < want <= len(jobs[i]) - history:
        want, ev = len(jobs[i]) - history + 1, 1.0  # evicted: the oldest kept variate
      if latest:  # the non-causal reading: whatever the client wrote last
        want = len(jobs[i])
      c_i = jobs[i][want - 1] if want > 0 else np.zeros_like(x)
      corr = (cs[s] - c_i) if correction else 0.0 * c_i
      y, grads = xs[s].copy(), []
      for _ in range(k):
        g = np_grad(a[i], b[i], y)
        grads.append(g)
        y = y - client_lr * (g + corr)
      c_plus = np.mean(grads, axis=0)
      ids.append(i)
      deltas.append(xs[s] - y)
      dcs.append(c_plus - c_i)
      cplus.append(c_plus)
      starts.append(xs[s])
    evicted.append(ev)
    if not ids:  # an empty step: nothing moves, no moment is updated
      xs.append(x), cs.append(c), applied.append(applied[t].copy())
      continue
    for i, cp in zip(ids, cplus):  # client states are written after the step's jobs ran
      jobs[i].append(cp)
    r = []
    first = not applied[t].any()  # no job applied yet: the server's first update
    for d, st in zip(deltas, starts):
      # Temporal gradient x_s - x_t (ours); the model itself at the first update (AFL-Lib).
      u = -x if first_update == 'model' and first else st - x
      nu, nd = np.linalg.norm(u), np.linalg.norm(d)
      cos = u @ d / (nu * nd) if nu > 0 and nd > 0 else zero_cosine
      r.append(max(cos, min_similarity))
    r = np.array(r)
    w = r / r.sum() if r.sum() > 0 else np.full(len(r), 1.0 / len(r))
    g = sum(wi * d for wi, d in zip(w, deltas))
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = beta1 * m + (1 - beta1) * g
    xs.append(x - server_lr * m_hat / (np.sqrt(v) + epsilon))
    cs.append(c + sum(wi * dc for wi, dc in zip(w, dcs)))
    nxt = applied[t].copy()
    for i in ids:
      nxt[i] += 1
    applied.append(nxt)
  return np.stack(xs[1:]), np.array(evicted)


@pytest.mark.parametrize('min_similarity', [-1.0, 0.0, 0.2])
def test_fedac_matches_numpy_over_stale_schedule_with_overlapping_jobs(min_similarity, x64):
  # seed 2 with a large server rate has negative cosines, so each floor r_min matters
  # (the three trajectories differ by > 0.1).
  a, b, x0, sched = stale_setup(2)  # client 0 has two jobs in flight twice
  hp = dict(HP, server_lr=1.5, min_similarity=min_similarity)
  res = simulate_quadratic('fedac', a, b, x0, sched, history=3, **hp)
  want, _ = _np_fedac(sched, a, b, x0, **hp)
  np.testing.assert_allclose(res.params_history['x'], want, rtol=1e-10, atol=1e-10)
  if min_similarity != 0.0:
    return
  # history=2 already covers this schedule: client 0 never needs an evicted variate.
  res2 = simulate_quadratic('fedac', a, b, x0, sched, history=2, **hp)
  np.testing.assert_allclose(res2.params_history['x'], want, rtol=1e-10, atol=1e-10)
  np.testing.assert_array_equal(res2.metrics['client/variate_evicted'], 0.0)


def test_fedac_variates_are_causal_not_latest(x64):
  # The reading "use whatever variate the client last wrote" differs on this schedule.
  a, b, x0, sched = stale_setup()
  res = simulate_quadratic('fedac', a, b, x0, sched, **HP)
  causal, _ = _np_fedac(sched, a, b, x0, **HP)
  np.testing.assert_allclose(res.params_history['x'], causal, rtol=1e-10, atol=1e-10)
  latest, _ = _np_fedac(sched, a, b, x0, latest=True, **HP)
  assert np.max(np.abs(causal - latest)) > 1e-3  # the readings differ on this schedule


def test_fedac_eviction_uses_oldest_kept_variate_and_reports_it(x64):
  # Client 0: a job started at s=1 arrives at t=3 after its jobs of t=1 and t=2 arrived;
  # it needs the variate of job #1 (arrived at t=0), which history=2 no longer keeps.
  a, b = make_quadratic(num_clients=2, dtype=np.float64)
  x0 = np.linspace(-1, 1, 4)
  sched = afl_jax.schedules.from_arrays(
    [[0, 1], [0, 1], [0, 1], [0, 1]], [[0, 0], [1, 0], [2, 2], [1, 3]], local_steps=2
  )
  for history, flagged in ((2, [0, 0, 0, 1]), (3, [0, 0, 0, 0])):
    res = simulate_quadratic('fedac', a, b, x0, sched, history=history, **HP)
    want, ev = _np_fedac(sched, a, b, x0, history=history, **HP)
    np.testing.assert_array_equal(ev, flagged)
    np.testing.assert_allclose(res.params_history['x'], want, rtol=1e-10, atol=1e-10)
    # the client metric is the mean over the step's two jobs
    np.testing.assert_allclose(res.metrics['client/variate_evicted'], np.array(flagged) / 2)


def test_fedac_fresh_arrivals_without_correction_is_fedbuff_then_prospective_momentum(x64):
  a, b = make_quadratic(num_clients=4, dtype=np.float64)
  t_steps = 4
  sched = fresh_schedule(4, t_steps, local_steps=3)
  res = simulate_quadratic('fedac', a, b, np.zeros(4), sched, correction=False, **HP)
  x, m, v = np.zeros(4), 0.0, 0.0
  for t in range(t_steps):  # fresh: x_s = x_t, cos undefined -> uniform weights
    local = [np_local_gd(a[i], b[i], x, 0.3, 3) for i in range(4)]
    g = x - np.mean(local, axis=0)  # FedBuff's mean pseudo-gradient
    m = 0.6 * m + 0.4 * g
    v = 0.9 * v + 0.1 * g * g
    x = x - 0.5 * (0.6 * m + 0.4 * g) / (np.sqrt(v) + 1e-3)
    np.testing.assert_allclose(res.params_history['x'][t], x, rtol=1e-10, atol=1e-12)


def test_fedac_empty_step_and_exact_zeros(x64):
  check_empty_step_and_exact_zeros('fedac', lambda *args, **hp: _np_fedac(*args, **hp)[0], **HP)


@pytest.mark.parametrize(
  'min_similarity, zero_cosine, first_update',
  [(0.1, 0.0, 'model'), (0.0, 0.0, 'movement'), (-1.0, 1.0, 'model'), (0.1, 0.0, 'movement')],
)
def test_fedac_similarity_conventions_match_numpy(min_similarity, zero_cosine, first_update, x64):
  """AFL-Lib's readings (floor 0.1, cosine 0 for a zero vector, first update on the
  model) and their mixtures, against the NumPy loop; each changes the trajectory."""
  a, b = make_quadratic(seed=2, dtype=np.float64)
  x0 = np.array([-0.05, 0.05, -0.1, -0.025])  # first-update cosines with x_0: 0.23, 0.31
  sched = stale_schedule()
  hp = dict(HP, server_lr=1.5, min_similarity=min_similarity)
  opts = dict(zero_cosine=zero_cosine, first_update=first_update)
  res = simulate_quadratic('fedac', a, b, x0, sched, history=3, **hp, **opts)
  want, _ = _np_fedac(sched, a, b, x0, **hp, **opts)
  got = np.asarray(res.params_history['x'])
  np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
  ours, _ = _np_fedac(sched, a, b, x0, **hp)  # zero_cosine=1, first_update='movement'
  assert np.abs(want - ours).max() > 1e-3  # the convention matters on this schedule


def test_fedac_server_sizes_its_table_by_num_clients():
  assert afl_jax.servers.fedac(num_clients=4).init({'x': jnp.zeros(2)}).applied.shape == (4,)
