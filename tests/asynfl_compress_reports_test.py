"""Always-on runs compress only the reporting clients' messages (AsynFLC-EF).

Yang, Hou, Wu, Alg. 1 lines 8-16, eqs. 7-10: every client trains every round, but only a
client in S_t uploads ``C(Delta + e_i)`` and updates ``e_i``; the others keep ``e_i``
frozen. Checked against a NumPy loop of eqs. 8-10, step by step, on waiting windows with
steps of no report, and that the compressor runs on the most reports of any step, not
on N rows (2 devices: tests/helpers/asynfl_two_devices.py).
"""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from compression_test import np_top_k
from quadratic import make_quadratic, np_local_gd, quadratic_problem

import afl_jax

N, DIM, LR, ETA_G = 6, 5, 0.2, 1.7
K = np.array([1, 2, 3, 2, 1, 2])


def _schedule():
  """Waiting windows: between 0 and 3 reports per step, some steps with none."""
  s = afl_jax.schedules.waiting_windows(
    N,
    12,
    window=1.0,
    durations=afl_jax.schedules.durations.make('normal', mean=2.2, std=1.0),
    local_steps=K,
    seed=3,
  )
  counts = s.mask.sum(axis=1)
  assert counts.min() == 0 and 0 < counts.max() < N, counts
  return s


def _simulator(dtype=np.float64):
  a, b = make_quadratic(num_clients=N, dim=DIM, dtype=dtype)
  alg = afl_jax.algorithms.get(
    'asynflc_ef', client_lr=LR, server_lr=ETA_G, num_clients=N, compressor='top_k', fraction=0.4
  )
  sim = afl_jax.Simulator(alg, quadratic_problem(a, b), _schedule(), chunk_size=1)
  return sim, a, b


def test_ef_residuals_of_absent_clients_stay_frozen_step_by_step(x64):
  """eqs. 8-10 per step in NumPy: e_i changes only in the steps where i reports."""
  sim, a, b = _simulator()
  sched = sim.schedules[0]
  key = jax.random.key(0)
  state = sim.init({'x': jnp.linspace(-1.0, 1.0, DIM)}, key)
  x = np.linspace(-1.0, 1.0, DIM)
  local = [x.copy() for _ in range(N)]
  synced = [x.copy() for _ in range(N)]
  err = np.zeros((N, DIM))
  previous = np.zeros((N, DIM))  # the engine's residuals after the step before
  for t in range(sched.num_steps):
    state, out = sim.run_chunk(state, key)
    s_t = set(sched.client_ids[t][sched.mask[t]].tolist())
    total = np.zeros(DIM)
    for i in range(N):
      x_tk = np_local_gd(a[i], b[i], local[i], LR, K[i])
      if i in s_t:
        delta = x_tk - synced[i]
        sent = np_top_k(delta + err[i], 2)  # eq. (8)
        err[i] = err[i] + delta - sent  # eq. (9)
        total += sent
      else:
        local[i] = x_tk
    x = x + ETA_G / N * total  # eq. (10)
    for i in s_t:
      local[i], synced[i] = x.copy(), x.copy()
    got = np.asarray(jax.tree.leaves(state.compressor)[0])
    np.testing.assert_allclose(got, -err, rtol=0, atol=1e-12)  # our Delta is -(paper's)
    absent = [i for i in range(N) if i not in s_t]
    np.testing.assert_array_equal(got[absent], previous[absent])  # bit for bit
    previous = got
    np.testing.assert_allclose(sim.params(state)['x'], x, rtol=0, atol=1e-12)
    assert out['metrics']['arrivals'][0] == len(s_t)
    index_bits = int(np.ceil(np.log2(DIM)))
    assert out['metrics']['bits_up'][0] == len(s_t) * 2 * (32 + index_bits)
  assert np.abs(x - np.linspace(-1.0, 1.0, DIM)).max() > 0.1  # it moved


def test_the_compressor_runs_on_the_reporting_rows_only():
  sim, _, _ = _simulator(np.float32)
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
  assert rows == [-(-most // d) * d] and most < N
