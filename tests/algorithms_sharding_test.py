"""Every registered algorithm gives the same iterates and client states on all devices as on one
(CI runs it with AFL_JAX_TEST_DEVICES=1 and 2; N = 3 and 5 do not divide 2)."""

import os

import algorithm_cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.sim_runs import run

import afl_jax

T = 5


def test_runs_on_the_requested_number_of_devices():
  assert len(jax.devices()) == int(os.environ.get('AFL_JAX_TEST_DEVICES', '1'))


def _loss(params, batch):
  r = batch['a'] @ params['x'] - batch['b']
  return 0.5 * jnp.mean(r * r)


def _problem(n):
  rng = np.random.default_rng(n)
  clients = [{'a': rng.normal(size=(k, 4)), 'b': rng.normal(size=k)} for k in range(2, 2 + n)]
  return afl_jax.problems.from_loss(_loss, clients)


def _schedule(n, regime):
  if regime == 'always_on':  # continuous training: starts follow each client's reports
    durations = afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5)
    return afl_jax.schedules.waiting_windows(n, T, window=1.0, durations=durations, local_steps=2)
  return afl_jax.schedules.random_staleness(n, 2, T, window=3, local_steps=2, seed=n)


def _run(alg, problem, sched, devices):
  out, state, _ = run(alg, problem, sched, {'x': jnp.linspace(-1.0, 1.0, 4)}, devices=devices)
  leaves = [np.asarray(v, np.float64) for v in jax.tree.leaves(state.clients)]
  return np.asarray(out['params']['x']), leaves


@pytest.mark.parametrize('n', [3, 5])
@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_all_devices_equal_one_device(name, n, x64):
  problem = _problem(n)
  info = algorithm_cases.run_info(n, num_rounds=T)
  alg = algorithm_cases.build(name, info)
  sched = _schedule(n, alg.regime)
  one, one_clients = _run(alg, problem, sched, jax.devices()[:1])
  assert np.all(np.isfinite(one)) and np.max(np.abs(one[-1] - np.linspace(-1, 1, 4))) > 1e-6
  if len(jax.devices()) == 1:
    return  # the 1-device pass of CI; the 2-device pass compares below
  many, many_clients = _run(alg, problem, sched, jax.devices())
  np.testing.assert_allclose(many, one, rtol=1e-12, atol=1e-12)
  for a, b in zip(many_clients, one_clients, strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
