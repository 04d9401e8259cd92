"""AsynFL / AsynFLC / AsynFLC-EF (Yang, Hou, Wu: eqs. (2)-(10), Alg. 1) through the engine vs
NumPy loops in the paper's own form and sign (participants download x_{t+1} after the step)."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from compression_test import np_top_k
from quadratic import make_quadratic, np_local_gd, np_replay, quadratic_problem, simulate_quadratic
from same import assert_close_ulps

import afl_jax

N, DIM = 4, 5
K = np.array([1, 2, 3, 2])
LR, ETA_G = 0.2, 1.7
HP = dict(client_lr=LR, server_lr=ETA_G, num_clients=N)


def _flexible_schedule(n=N, steps=10, mean=1.6, std=0.8, seed=2, window=1.0):
  """Waiting windows (1 s), N(mean, std) job times; by default |S_t| in {0, .., 3}, tau_max = 3."""
  durations = afl_jax.schedules.durations.make('normal', mean=mean, std=std)
  return afl_jax.schedules.waiting_windows(
    n, steps, window=window, durations=durations, local_steps=np.resize(K, n), seed=seed
  )


def np_asynfl(
  schedule, a, b, x0, lr, eta_g, steps, normalizer='clients', compress=None, error_feedback=False
):
  """Algorithm 1 / eqs. (2)-(10) literally; returns x_1..x_T and the residuals after each step."""
  n = schedule.num_clients
  x = np.array(x0, np.float64)
  local = [x.copy() for _ in range(n)]  # x_t^{(i)}
  synced_to = [x.copy() for _ in range(n)]  # x_{t - tau_t^i}
  err = [np.zeros_like(x) for _ in range(n)]  # e^{(i)}
  history, errs = [], []
  for t in range(schedule.num_steps):
    s_t = set(schedule.client_ids[t][schedule.mask[t]].tolist())
    total = np.zeros_like(x)
    for i in range(n):  # Alg. 1 line 2: every client, every round
      x_tk = np_local_gd(a[i], b[i], local[i], lr, steps[i])  # eq. (2), lines 3-7
      if i in s_t:
        delta = x_tk - synced_to[i]  # eq. (3), line 10
        if error_feedback:
          sent = compress(delta + err[i])  # eq. (8), line 11
          err[i] = err[i] + delta - sent  # eq. (9), line 13
        else:
          sent = delta if compress is None else compress(delta)  # eq. (7)
        total += sent
      else:
        local[i] = x_tk  # eq. (4), line 16 (err[i] untouched)
    denom = n if normalizer == 'clients' else max(len(s_t), 1)
    x = x + eta_g / denom * total  # eqs. (5), (7), (10)
    for i in s_t:  # line 14: participants download x_{t+1}
      local[i] = x.copy()
      synced_to[i] = x.copy()
    history.append(x)
    errs.append(np.stack(err))
  return np.stack(history), np.stack(errs)


def _run(name, schedule, dtype=np.float64, **hp):
  a, b = make_quadratic(num_clients=N, dim=DIM, dtype=dtype)
  x0 = np.linspace(-1, 1, DIM).astype(dtype)
  return simulate_quadratic(name, a, b, x0, schedule, **HP, **hp), a, b, x0


def test_sync_limit_is_local_sgd_averaged_with_weight_s_over_n(x64):
  """window=None: everyone reports every round from x_t -> x + eta_g |S_t|/n mean(x_K - x)."""
  sched = _flexible_schedule(steps=5, mean=5, std=1, window=None)
  assert sched.mask.all() and sched.max_staleness == 0
  res, a, b, x0 = _run('asynfl', sched)
  x = np.array(x0)
  for t in range(sched.num_steps):
    s_t = sched.client_ids[t][sched.mask[t]]
    mean = np.mean([np_local_gd(a[i], b[i], x, LR, K[i]) - x for i in s_t], axis=0)
    x = x + ETA_G * len(s_t) / N * mean
    np.testing.assert_allclose(res.params_history['x'][t], x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
  'normalizer,dtype,rtol,atol',
  [
    ('clients', np.float64, 1e-10, 1e-12),
    ('arrivals', np.float64, 1e-10, 1e-12),
    ('clients', np.float32, 1e-4, 1e-5),
  ],
)
def test_asynfl_flexible_participation_matches_eqs_2_to_5(normalizer, dtype, rtol, atol):
  with jax.enable_x64(dtype == np.float64):
    sched = _flexible_schedule()
    assert sched.max_staleness >= 2 and set(sched.arrivals_per_step.tolist()) >= {0, 1, 3}
    res, a, b, x0 = _run('asynfl', sched, dtype=dtype, normalizer=normalizer)
    expected, _ = np_asynfl(sched, a, b, x0, LR, ETA_G, K, normalizer)
    assert res.params_history['x'].dtype == dtype
    np.testing.assert_allclose(res.params_history['x'], expected, rtol=rtol, atol=atol)


def test_per_job_option_is_fedbuff_style_over_n_and_differs_from_continuous(x64):
  """local_training='per_job': K steps from x_{start}; x <- x + eta_g/n sum(x_K - x_start)."""
  sched = _flexible_schedule()
  res, a, b, x0 = _run('asynfl', sched, local_training='per_job')
  step = lambda x, locals_, starts, taus: x + ETA_G / N * (np.sum(locals_, 0) - np.sum(starts, 0))
  expected = np_replay(sched, a, b, x0, LR, step)
  np.testing.assert_allclose(res.params_history['x'], expected, rtol=1e-10, atol=1e-12)
  continuous, _ = np_asynfl(sched, a, b, x0, LR, ETA_G, K)
  assert np.max(np.abs(continuous - expected)) > 1e-3


def test_asynflc_top_k_matches_eq_7(x64):
  """AsynFLC: eq. (7); AsynFLC-EF with Top-k: test_ef_only_reporting_clients_upload_...."""
  sched = _flexible_schedule()
  res, a, b, x0 = _run('asynflc', sched, compressor='top_k', fraction=0.4)  # k = 2 of 5
  expected, _ = np_asynfl(sched, a, b, x0, LR, ETA_G, K, compress=lambda v: np_top_k(v, 2))
  np.testing.assert_allclose(res.params_history['x'], expected, rtol=1e-10, atol=1e-12)
  uncompressed, _ = np_asynfl(sched, a, b, x0, LR, ETA_G, K)
  assert np.max(np.abs(uncompressed - expected)) > 1e-3


def test_asynflc_ef_with_identity_is_asynfl(x64):
  sched = _flexible_schedule()
  plain, *_ = _run('asynfl', sched)
  ef, *_ = _run('asynflc_ef', sched, compressor='identity')
  # Identity compression adds and subtracts an exact zero, but AsynFLC-EF is another
  # program (it compresses a gathered block): 4 ulps of the values' scale per step.
  assert_close_ulps(ef.params_history['x'], plain.params_history['x'], ulps=4 * sched.num_steps)
  # The residual is a message minus itself: exactly zero in any program.
  np.testing.assert_array_equal(ef.final_state.compressor.residual['x'], 0.0)


@pytest.mark.parametrize('name', ['asynflc', 'asynflc_ef'])
def test_sign_of_a_zero_update_is_plus_one_on_the_papers_delta(name, x64):
  """A coordinate no sample touches has Delta_i = 0 exactly: C(Delta)_i = +1 (eqs. 3, 7, 8;
  Sec. III-B (2): Sign(x)_i = +1 for x_i >= 0, -1 otherwise)."""
  sched = _flexible_schedule()
  a, b = make_quadratic(num_clients=N, dim=DIM, dtype=np.float64)
  a[:, :, 2] = 0.0  # coordinate 2 never gets a gradient: its update is exactly 0
  x0 = np.linspace(-1, 1, DIM)
  res = simulate_quadratic(name, a, b, x0, sched, **HP, compressor='sign')
  sign, ef = (lambda v: np.where(v >= 0, 1.0, -1.0)), name == 'asynflc_ef'
  expected, _ = np_asynfl(sched, a, b, x0, LR, ETA_G, K, compress=sign, error_feedback=ef)
  np.testing.assert_allclose(res.params_history['x'], expected, rtol=1e-12, atol=1e-12)
  if name == 'asynflc':  # every report moves coordinate 2 up by eta_g / n
    reports = np.cumsum(sched.arrivals_per_step)
    np.testing.assert_allclose(
      res.params_history['x'][:, 2], x0[2] + ETA_G / N * reports, rtol=1e-12
    )


def _ef_simulator(dtype):
  """AsynFLC-EF (Top-k, k = 2 of 5) over 6 clients, some steps with no report, chunks of 1."""
  sched = _flexible_schedule(n=6, steps=12, mean=2.2, std=1.0, seed=3)
  counts = sched.mask.sum(axis=1)
  assert counts.min() == 0 and 0 < counts.max() < 6, counts
  a, b = make_quadratic(num_clients=6, dim=DIM, dtype=dtype)
  alg = afl_jax.algorithms.make(
    'asynflc_ef', client_lr=LR, server_lr=ETA_G, num_clients=6, compressor='top_k', fraction=0.4
  )
  return afl_jax.Simulator(alg, quadratic_problem(a, b), sched, chunk_size=1), a, b


def test_ef_only_reporting_clients_upload_and_update_their_residual(x64):
  """Alg. 1 lines 8-16 step by step: e_i changes only in the steps where i reports (bit for
  bit frozen otherwise); the bits sent are those of the reports."""
  sim, a, b = _ef_simulator(np.float64)
  sched, key, x0 = sim.schedules[0], jax.random.key(0), np.linspace(-1.0, 1.0, DIM)
  top2 = lambda v: np_top_k(v, 2)
  xs, errs = np_asynfl(sched, a, b, x0, LR, ETA_G, np.resize(K, 6), 'clients', top2, True)
  state, previous = sim.init({'x': jnp.asarray(x0)}, key), np.zeros((6, DIM))
  for t in range(sched.num_steps):
    state, out = sim.run_chunk(state, key)
    reports = sched.client_ids[t][sched.mask[t]]
    got = np.asarray(jax.tree.leaves(state.compressor)[0])
    np.testing.assert_allclose(got, -errs[t], rtol=0, atol=1e-12)  # our Delta is -(paper's)
    absent = np.setdiff1d(np.arange(6), reports)
    np.testing.assert_array_equal(got[absent], previous[absent])
    previous = got
    np.testing.assert_allclose(sim.params(state)['x'], xs[t], rtol=0, atol=1e-12)
    assert out['metrics']['arrivals'][0] == len(reports)
    assert out['metrics']['bits_up'][0] == len(reports) * 2 * (32 + 3)  # ceil(log2 5) = 3
  assert np.abs(xs[-1] - x0).max() > 0.1 and np.abs(errs[-1]).max() > 1e-3  # it moved, lost


def test_the_compressor_runs_on_the_reporting_rows_only():
  """The compressor sees the most reports of any step (rounded to the devices), not N rows."""
  sim, _, _ = _ef_simulator(np.float32)
  key = jax.random.key(0)
  jaxpr = jax.make_jaxpr(sim._chunk)(*sim.args(sim.init({'x': jnp.zeros(DIM)}, key), key))
  rows = []

  def walk(jx):
    for eqn in jx.eqns:
      if eqn.primitive.name == 'top_k':
        rows.append(eqn.invars[0].aval.shape[0])
      for sub in jax.extend.core.jaxprs_in_params(eqn.params):
        walk(sub)

  walk(jaxpr.jaxpr)
  most, d = int(sim.schedules[0].mask.sum(axis=1).max()), sim.num_devices
  assert rows == [-(-most // d) * d] and most < 6
