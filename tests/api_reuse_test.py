"""``afl_jax.simulate`` called again with the same algorithm, shapes and settings reuses the
compiled program (nothing compiles) and gives what a fresh compile gives, bit for bit."""

import jax
import numpy as np
import pytest
import quadratic as q

import afl_jax
from afl_jax.core import simulator

COMPILE = '/jax/core/compile/backend_compile_duration'


@pytest.fixture
def compiles():
  seen = []
  listen = lambda name, _secs, **_: seen.append(name) if name == COMPILE else None
  jax.monitoring.register_event_duration_secs_listener(listen)
  yield seen
  jax.monitoring.unregister_event_duration_listener(listen)


def _other_schedule():  # the stale schedule's shapes, other clients and delays
  ids = np.asarray(q.STALE_IDS)[::-1].copy()
  start = np.minimum(np.asarray(q.STALE_START)[::-1], np.arange(6)[:, None])  # s <= t
  steps = np.asarray(q.STALE_STEPS)[::-1].copy()
  return afl_jax.schedules.from_arrays(ids, start, steps, q.STALE_MASK)


@pytest.mark.parametrize('name', ['fedbuff', 'masfl'])  # masfl sizes its state in prepare
def test_simulate_again_compiles_nothing_and_matches_a_fresh_compile(name, compiles):
  problem, key = q.quadratic_problem(*q.make_quadratic()), jax.random.key(3)
  x0 = {'x': np.zeros(4, np.float32)}
  alg = afl_jax.algorithms.make(name, client_lr=0.1, server_lr=0.5)
  run = lambda schedule: afl_jax.simulate(alg, problem, schedule, x0, key).params_history['x']
  first = run(q.stale_schedule())
  before = len(compiles)
  assert before > 0
  same = run(q.stale_schedule())  # a new schedule object with the same arrays
  assert len(compiles) == before
  np.testing.assert_array_equal(same, first)
  other = run(_other_schedule())  # other arrays: fedbuff reuses, masfl's prepare re-plans
  assert (len(compiles) == before) == (name == 'fedbuff')
  simulator._COMPILED.clear()
  fresh = run(_other_schedule())
  assert len(compiles) > before
  np.testing.assert_array_equal(other, fresh)
  assert not np.array_equal(other, first)
