"""Per-client state, the always-on regime and the compressor seam of the engine."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.sim_runs import run, windows
from quadratic import make_quadratic, quadratic_problem, simulate_quadratic

import afl_jax
from afl_jax.core import tree
from afl_jax.core.memory import InsufficientMemoryError
from afl_jax.core.types import Algorithm, ClientRule


class Count(NamedTuple):
  jobs: jax.Array  # int32: jobs this client ran (state written back)
  reports: jax.Array  # int32: jobs whose message the server used


def counting_client():
  """Sends its start params unchanged (Delta = 0) and counts jobs and reports."""

  init = lambda params, task, key: Count(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

  def update(start, state, task, key):
    return tree.zeros_like(start), Count(state.jobs + 1, state.reports + task.active), {}

  return ClientRule(init, update)


def test_per_client_state_scatter_ignores_padding_with_duplicate_ids():
  a, b = make_quadratic(num_clients=4)
  # Padded slots reuse ids of real arrivals in the same step; they must not write.
  sched = afl_jax.schedules.from_arrays(
    [[0, 0, 1], [2, 3, 2], [1, 1, 1]],
    [[0, 0, 0], [1, 0, 1], [2, 2, 2]],
    mask=[[1, 0, 1], [1, 1, 0], [0, 1, 0]],
    num_clients=4,
  )
  alg = Algorithm('count', counting_client(), afl_jax.servers.fedbuff(1.0))
  res = simulate_quadratic(alg, a, b, np.zeros(4), sched)
  np.testing.assert_array_equal(res.final_state.clients.jobs, sched.participation_counts)
  np.testing.assert_array_equal(res.final_state.clients.jobs, [1, 2, 1, 1])


def test_always_on_clients_train_every_step_and_report_per_schedule():
  a, b = make_quadratic(num_clients=5)
  sched = afl_jax.schedules.waiting_windows(
    5, 7, window=1.0, durations=afl_jax.schedules.durations.make('uniform', low=0.5, high=2.5)
  )
  alg = Algorithm('count', counting_client(), afl_jax.servers.fedbuff(1.0), regime='always_on')
  res = simulate_quadratic(alg, a, b, np.zeros(4), sched)
  np.testing.assert_array_equal(res.final_state.clients.jobs, np.full(5, 7))
  np.testing.assert_array_equal(res.final_state.clients.reports, sched.participation_counts)
  np.testing.assert_array_equal(res.metrics['arrivals'], sched.arrivals_per_step)


def test_compressor_applied_per_report_and_frozen_while_absent():
  a, b = make_quadratic()
  sched = afl_jax.schedules.from_arrays(
    [[0, 1], [2, 0], [0, 2]], [[0, 0], [0, 1], [2, 1]], local_steps=2, mask=[[1, 1], [1, 0], [1, 1]]
  )
  plain = afl_jax.algorithms.make('fedbuff', client_lr=0.2, server_lr=1.0)
  # sends half the message; its state counts compressions (frozen while absent)
  compress = lambda updates, state, key: (tree.scale(0.5, updates), state + 1, jnp.float32(7.0))
  halving = afl_jax.compression.Compressor(lambda updates: jnp.zeros((), jnp.int32), compress)
  halved = plain._replace(compressor=halving)
  r_plain = simulate_quadratic(plain, a, b, np.ones(4), sched)
  r_half = simulate_quadratic(halved, a, b, np.ones(4), sched)
  np.testing.assert_array_equal(r_half.final_state.compressor, sched.participation_counts)
  np.testing.assert_allclose(r_half.metrics['bits_up'], 7.0 * sched.arrivals_per_step)
  np.testing.assert_allclose(r_plain.metrics['bits_up'], 4 * 32 * sched.arrivals_per_step)
  # Step 0 only: both start from x0, so the halved update is exactly half the step.
  d_plain = r_plain.params_history['x'][0] - 1.0
  d_half = r_half.params_history['x'][0] - 1.0
  np.testing.assert_allclose(d_half, 0.5 * d_plain, rtol=1e-6)


def test_fedasync_staleness_functions():
  tau = jnp.arange(6.0)
  s = afl_jax.servers.staleness_function
  np.testing.assert_allclose(s('constant')(tau), np.ones(6))
  np.testing.assert_allclose(s('polynomial', a=0.5)(tau), (1 + np.arange(6.0)) ** -0.5)
  np.testing.assert_allclose(
    s('hinge', a=2.0, b=2.0)(tau), [1, 1, 1, 1 / 3, 1 / 5, 1 / 7], rtol=1e-6
  )


def test_client_blocks_give_the_same_run():
  """Training arrival slots in blocks (bounded memory) changes nothing."""
  a, b = make_quadratic(num_clients=9)
  sched = afl_jax.schedules.fedbuff(9, 5, 4, 8, local_steps=2, seed=3)
  alg = afl_jax.algorithms.make('fedbuff', client_lr=0.2, server_lr=0.8)
  p0 = {'x': jnp.ones(4)}
  runs = []
  for block in (None, 1, 3):
    out, _, sim = run(alg, quadratic_problem(a, b), sched, p0, client_block_size=block)
    runs.append((out['params']['x'], out['metrics']['bits_up'], sim.num_slots))
  up = lambda n, m: -(-n // m) * m  # blocks and slots are multiples of the devices
  d = jax.device_count()
  assert [r[2] for r in runs] == [up(4, d), up(4, d), up(4, up(3, d))]  # 1 device: 3 -> 6
  for hist, bits, _ in runs[1:]:
    np.testing.assert_allclose(hist, runs[0][0], atol=1e-6)
    np.testing.assert_array_equal(bits, runs[0][1])


def test_memory_is_reported_and_too_large_runs_are_refused():
  a, b = make_quadratic(num_clients=5)
  sched = windows(5, 4)
  alg = afl_jax.algorithms.make('asynflc_ef', client_lr=0.1, num_clients=5, fraction=0.5)
  p0 = {'x': jnp.ones(4, jnp.float32)}
  sim = afl_jax.Simulator(alg, quadratic_problem(a, b), sched)
  sim.init(p0, jax.random.key(0))
  # always-on AsynFL: local model + anchor (+ a flag) per client, and an EF residual.
  assert sim.memory['per_client_state'] >= 5 * (3 * 4 * 4)
  assert sim.memory['ring_buffer'] == 1 * 4 * 4
  assert sim.memory['total'] == sum(v for k, v in sim.memory.items() if k != 'total')
  tight = afl_jax.Simulator(
    alg, quadratic_problem(a, b), sched, memory_limit_bytes=sim.memory['total'] // 2
  )
  with pytest.raises(InsufficientMemoryError, match='needs about .* GiB'):
    tight.init(p0, jax.random.key(0))
