"""Always-on runs compress only the messages of the clients that report (issue 16).

AsynFLC / AsynFLC-EF (Yang, Hou, Wu, Alg. 1 lines 8-16, eqs. 7-10): every client
trains every round, but only a client in S_t uploads ``C(Delta + e_i)`` and updates
``e_i``; the others keep ``e_i`` frozen. The engine gathers the reporting clients'
messages into a block as wide as the most reports of any step, compresses that
block and scatters it back (``engine.compress_reports``). Checked here: the same
results as compressing every client's message (the earlier path,
``compress_reports_only=False``) to a few ulps (the two programs batch their products
at different widths, so XLA may round them differently), the residuals of absent
clients frozen step by step against a NumPy loop of eqs. 8-9, a step with no report,
and that the compressor really runs on ``report_slots`` rows, not N. Two devices with N = 5:
tests/helpers/compress_reports_two_devices.py.
"""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from compression_test import np_top_k
from helper_runs import run_helper
from quadratic import make_quadratic, np_local_gd, quadratic_problem
from same import assert_close_ulps

import afl_jax
from afl_jax.core import engine

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


def _simulator(name, schedule, dtype, reports_only=True, **hp):
  a, b = make_quadratic(num_clients=N, dim=DIM, dtype=dtype)
  alg = afl_jax.algorithms.get(name, client_lr=LR, server_lr=ETA_G, num_clients=N, **hp)
  sim = afl_jax.Simulator(
    alg,
    quadratic_problem(a, b),
    schedule,
    chunk_size=1,
    record_params=True,
    compress_reports_only=reports_only,
  )
  return sim, a, b


def _trajectory(sim, dtype):
  """Per step: params, every client's residual (or ()), metrics."""
  state = sim.init({'x': jnp.linspace(-1.0, 1.0, DIM).astype(dtype)}, jax.random.key(0))
  params, residuals, metrics = [], [], []
  while sim.position(state) < sim.schedule.num_steps:
    state, out = sim.run_chunk(state, jax.random.key(0))
    params.append(np.asarray(out['params']['x'][0]))
    leaves = jax.tree.leaves(state.compressor)
    residuals.append([np.asarray(x) for x in leaves])
    metrics.append({k: np.asarray(v[0]) for k, v in out['metrics'].items()})
  return np.stack(params), residuals, metrics


@pytest.mark.parametrize(
  'name, hp',
  [
    ('asynflc_ef', dict(compressor='top_k', fraction=0.4)),
    ('asynflc', dict(compressor='qsgd', bits=3)),
    ('asynflc_ef', dict(compressor='sign')),
  ],
)
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_reports_only_equals_compressing_every_client(name, hp, dtype):
  with jax.enable_x64(dtype == np.float64):  # scoped: no other test inherits x64
    sched = _schedule()
    new, _, _ = _simulator(name, sched, dtype, **hp)
    assert new.report_slots == int(sched.mask.sum(axis=1).max()) < N
    old, _, _ = _simulator(name, sched, dtype, reports_only=False, **hp)
    p_new, r_new, m_new = _trajectory(new, dtype)
    p_old, r_old, m_old = _trajectory(old, dtype)
    # Products batched at another width round differently on some CPUs (1 ulp seen): allow
    # 4 ulps of the values' scale per step (counts such as arrivals and bits, whole numbers
    # far below 1 / tolerance, are still held exactly).
    ulps = 4 * sched.num_steps
    assert_close_ulps(p_new, p_old, ulps=ulps)
    for a, b in zip(r_new, r_old, strict=True):
      for x, y in zip(a, b, strict=True):
        assert_close_ulps(x, y, ulps=ulps)
    for a, b in zip(m_new, m_old, strict=True):
      assert a.keys() == b.keys()
      for k in a:
        assert_close_ulps(a[k], b[k], ulps=ulps, err_msg=k)
    assert np.max(np.abs(p_new[-1] - np.linspace(-1, 1, DIM))) > 0.1  # it moved


def test_ef_residuals_of_absent_clients_stay_frozen_step_by_step(x64):
  """eqs. 8-9 per step in NumPy: e_i changes only in the steps where i reports."""
  sched = _schedule()
  sim, a, b = _simulator('asynflc_ef', sched, np.float64, compressor='top_k', fraction=0.4)
  params, residuals, metrics = _trajectory(sim, np.float64)
  x = np.linspace(-1.0, 1.0, DIM)
  local = [x.copy() for _ in range(N)]
  synced = [x.copy() for _ in range(N)]
  err = np.zeros((N, DIM))
  previous = np.zeros((N, DIM))  # the engine's residuals after the step before
  for t in range(sched.num_steps):
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
    got = residuals[t][0]
    np.testing.assert_allclose(got, -err, rtol=0, atol=1e-12)  # our Delta is -(paper's)
    absent = [i for i in range(N) if i not in s_t]
    np.testing.assert_array_equal(got[absent], previous[absent])  # bit for bit
    previous = got
    np.testing.assert_allclose(params[t], x, rtol=0, atol=1e-12)
    assert metrics[t]['arrivals'] == len(s_t)
    index_bits = int(np.ceil(np.log2(DIM)))
    assert metrics[t]['bits_up'] == len(s_t) * 2 * (32 + index_bits)


def _top_k_operand_rows(sim):
  state = sim.init({'x': jnp.zeros(DIM, jnp.float32)}, jax.random.key(0))
  jaxpr = jax.make_jaxpr(sim._chunk_impl)(state, sim.inputs(0), sim.problem, jax.random.key(0))
  rows = []

  def walk(jx):
    for eqn in jx.eqns:
      if eqn.primitive.name == 'top_k':
        rows.append(eqn.invars[0].aval.shape[0])
      for sub in jax.extend.core.jaxprs_in_params(eqn.params):
        walk(sub)

  walk(jaxpr.jaxpr)
  return rows


def test_the_compressor_runs_on_the_reporting_rows_only():
  sched = _schedule()
  new, _, _ = _simulator('asynflc_ef', sched, np.float32, compressor='top_k', fraction=0.4)
  old, _, _ = _simulator(
    'asynflc_ef', sched, np.float32, reports_only=False, compressor='top_k', fraction=0.4
  )
  assert _top_k_operand_rows(new) == [new.report_slots]
  # the earlier path: every slot, in the blocks of slots it trains (local_step_buckets)
  assert _top_k_operand_rows(old) == [old.block_size]
  assert old.num_slots == N > new.report_slots


def test_report_width_rounds_to_devices_and_caps_at_the_slots():
  sched = _schedule()
  most = int(sched.mask.sum(axis=1).max())
  assert engine.report_width(sched, 1, N) == most
  assert engine.report_width(sched, 2, N) == -(-most // 2) * 2
  assert engine.report_width(sched, 4, 4) == 4
  empty = afl_jax.schedules.from_arrays([[0]], [[0]], mask=[[False]], num_clients=2)
  assert engine.report_width(empty, 2, 2) == 2


def test_two_devices_n5_equals_one_device_and_the_full_path():
  diffs = run_helper('compress_reports_two_devices.py')
  assert {'reports_vs_full_2dev', 'two_vs_one_device', 'moved', 'report_slots'} <= set(diffs)
  assert diffs['report_slots'] % 2 == 0 and diffs['report_slots'] < 6
  # float64 values of order 1; the two paths batch at different widths: round-off only.
  assert diffs['reports_vs_full_2dev'] == pytest.approx(0.0, abs=1e-12)
  assert diffs['two_vs_one_device'] == pytest.approx(0.0, abs=1e-12)
  assert diffs['moved'] > 0.1
