"""Replaying hand-written schedules against plain-NumPy loops of the papers' equations."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import quadratic as q
from helpers.sim_runs import chunks
from same import assert_close_ulps

import afl_jax
from afl_jax import compression


def _fedasync_step(x, locals_, starts, taus, alpha=0.8, a=0.5):
  for xl, tau in zip(locals_, taus):
    w = alpha * (1.0 + tau) ** (-a)
    x = (1 - w) * x + w * xl
  return x


def _fedasync_alpha_one(x, locals_, starts, taus):  # each arrival replaces the model
  return locals_[-1] if locals_ else x


FEDASYNC = dict(client_lr=0.3, alpha=0.8, staleness='polynomial', a=0.5)


@pytest.mark.parametrize('dtype,tol', [(np.float32, 1e-5), (np.float64, 1e-10)])
@pytest.mark.parametrize(
  'name,hp,ref',
  [
    ('fedbuff', dict(client_lr=0.3, server_lr=0.7), q.np_fedbuff_step(0.7)),
    ('fedasync', FEDASYNC, _fedasync_step),
    ('fedasync', dict(client_lr=0.3, alpha=1.0, staleness='constant'), _fedasync_alpha_one),
  ],
)
def test_replay_matches_numpy(name, hp, ref, dtype, tol):
  """FedBuff, FedAsync (polynomial staleness; alpha = 1: the client's model replaces x)."""
  with jax.enable_x64(dtype == np.float64):
    a, b = q.make_quadratic(dtype=dtype)
    x0 = np.linspace(-1, 1, 4).astype(dtype)
    sched = q.stale_schedule()
    result = q.simulate_quadratic(name, a, b, x0, sched, **hp)
    expected = q.np_replay(sched, a, b, x0, hp['client_lr'], ref)
    assert result.params_history['x'].dtype == dtype
    np.testing.assert_allclose(result.params_history['x'], expected, atol=tol, rtol=tol)


def test_fedbuff_zero_staleness_full_participation_is_fedavg():
  a, b = q.make_quadratic(num_clients=4)
  t = 5
  sched = q.fresh_schedule(4, t, local_steps=3)
  x0 = np.zeros(4, np.float32)
  buff = q.simulate_quadratic('fedbuff', a, b, x0, sched, client_lr=0.2, server_lr=1.0)
  avg = q.simulate_quadratic('fedavg', a, b, x0, sched, client_lr=0.2, weighting='uniform')
  # FedAvg by definition: the mean of the client models trained from x_t.
  x = np.zeros(4)
  for step in range(t):
    x = np.mean([q.np_local_gd(a[i], b[i], x, 0.2, 3) for i in range(4)], axis=0)
    np.testing.assert_allclose(avg.params_history['x'][step], x, atol=1e-5)
  np.testing.assert_allclose(buff.params_history['x'], avg.params_history['x'], atol=1e-6)


def _logistic():
  """Six clients' mini-batched logistic problem (every step draws batches) and its p0."""
  return q.logistic_problem(6, 32, 5), {'w': jnp.zeros(5), 'b': jnp.zeros(())}


def _run_stochastic(seed, chunk_size=None):
  sched = afl_jax.schedules.fedbuff(6, 3, 2, 9, local_steps=3, seed=1)
  prob, p0 = _logistic()
  alg = afl_jax.algorithms.make('fedbuff', client_lr=0.5)
  return afl_jax.simulate(alg, prob, sched, p0, jax.random.key(seed), chunk_size=chunk_size)


def test_same_seed_bitwise_identical_different_seed_differs():
  r1, r2, r3 = _run_stochastic(0), _run_stochastic(0), _run_stochastic(1)
  np.testing.assert_array_equal(r1.params_history['w'], r2.params_history['w'])
  assert not np.array_equal(r1.params_history['w'], r3.params_history['w'])


def test_chunked_run_equals_one_scan():
  whole, chunked = _run_stochastic(0), _run_stochastic(0, chunk_size=4)  # 4 + 4 + 1 (padded)
  # Bitwise: both scan the same step program at the same shapes; only the trip count differs.
  np.testing.assert_array_equal(whole.params_history['w'], chunked.params_history['w'])
  np.testing.assert_array_equal(whole.metrics['arrivals'], chunked.metrics['arrivals'])


def test_slot_order_changes_only_the_order_of_sums():
  """Client i's batches and compressor draws are keyed by i and t, not by its slot: permuting
  each step's slots (a padded one included) changes only the order of sums (a few ulps)."""
  ids = np.array([[0, 1, 2], [3, 4, 0], [5, 1, 1], [2, 3, 4], [0, 5, 1], [4, 2, 3]])
  start = np.array([[0, 0, 0], [1, 0, 1], [2, 1, 2], [3, 2, 1], [4, 3, 4], [5, 3, 4]])
  steps = np.array([[3, 1, 2], [2, 3, 1], [1, 2, 3], [3, 3, 1], [2, 1, 2], [1, 3, 2]])
  mask = np.ones((6, 3), bool)
  mask[2, 2] = False  # a padded slot (reusing client 1's id), moved to slot 0 below
  perm = np.array([[2, 0, 1], [1, 2, 0], [2, 0, 1], [2, 1, 0], [0, 2, 1], [1, 2, 0]])
  take = lambda a: np.take_along_axis(a, perm, axis=1)
  prob, p0 = _logistic()  # mini-batches: every client's steps draw from its key
  alg = afl_jax.algorithms.make('fedbuff', client_lr=0.5, server_lr=0.8)
  alg = alg._replace(compressor=compression.qsgd(bits=4))  # random rounding
  sched = afl_jax.schedules.from_arrays(ids, start, local_steps=steps, mask=mask)
  shuffled = afl_jax.schedules.from_arrays(
    take(ids), take(start), local_steps=take(steps), mask=take(mask)
  )
  first, permuted, other_seed = [
    afl_jax.simulate(alg, prob, s, p0, jax.random.key(seed))
    for s, seed in [(sched, 0), (shuffled, 0), (sched, 1)]
  ]
  assert_close_ulps(permuted.params_history['w'], first.params_history['w'])
  assert_close_ulps(permuted.params_history['b'], first.params_history['b'])
  assert set(permuted.metrics) == set(first.metrics)
  for k, v in first.metrics.items():
    assert_close_ulps(permuted.metrics[k], v, err_msg=k)
  moved = np.abs(other_seed.params_history['w'] - first.params_history['w']).max()
  assert moved > 1e3 * 8 * np.finfo(np.float32).eps  # the draws matter here


def test_engine_compiles_once_for_a_whole_run():
  prob, p0 = _logistic()
  sched = afl_jax.schedules.fedbuff(6, 3, 2, 10, local_steps=3, seed=1)
  alg = afl_jax.algorithms.make('fedbuff', client_lr=0.5)
  sim = afl_jax.Simulator(alg, prob, sched, chunk_size=3)  # chunks of 3, 3, 3, 1 (padded)
  sim._chunk = chex.assert_max_traces(sim._chunk, n=1)
  key = jax.random.key(0)
  done = list(chunks(sim, sim.init(p0, key), key))
  assert len(done) == 4 and sim.position(done[-1][0]) == 10
  chex.clear_trace_counter()
