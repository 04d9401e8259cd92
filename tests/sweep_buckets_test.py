"""Sweeps group clients by K like single runs (``local_step_buckets``, issue 16).

Two replicas with different schedules (lengths, widths, per-client K) and learning
rates, float64: with the arrivals of each replica sorted by K into blocks (each block
looping to its own largest K), replica r equals the same run alone, and the sweep
equals the padded sweep (every client to the largest K of all replicas). Per-job
(FedBuff, random staleness) and always-on (AsynFLC-EF, per-client K, compressing the
reports only).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers.sim_runs import run
from quadratic import make_quadratic, quadratic_problem

import afl_jax
from afl_jax.api import run_replicas, simulator
from afl_jax.core import engine

N = 6


def _case(name):
  if name == 'fedbuff':
    scheds = [
      afl_jax.schedules.random_staleness(N, 3, 6, window=3, local_steps=[1, 4, 2, 2, 1, 4], seed=0),
      afl_jax.schedules.random_staleness(N, 2, 7, window=2, local_steps=[3, 1, 1, 2, 4, 1], seed=1),
    ]
    return scheds, dict(server_lr=1.0), {'client_lr': [0.05, 0.04]}
  d = afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5)
  scheds = [
    afl_jax.schedules.waiting_windows(
      N, 6, window=1.0, durations=d, local_steps=[1, 4, 2, 2, 1, 4], seed=0
    ),
    afl_jax.schedules.waiting_windows(
      N, 7, window=0.8, durations=d, local_steps=[3, 1, 1, 2, 4, 1], seed=1
    ),
  ]
  static = dict(num_clients=N, compressor='top_k', fraction=0.5, server_lr=1.0)
  return scheds, static, {'client_lr': [0.05, 0.04]}


def _sweep(name, buckets):
  scheds, static, varied = _case(name)
  a, b = make_quadratic(num_clients=N, dtype=np.float64)
  sim = simulator(
    name, quadratic_problem(a, b), scheds, 2, chunk_size=3, record_params=True,
    local_step_buckets=buckets, **static, **varied,
  )  # fmt: skip
  keys = jax.random.split(jax.random.key(3), 2)
  res = run_replicas(sim, {'x': jnp.ones(4, jnp.float64)}, keys)
  return sim, np.asarray(res.params_history['x'])


def _alone(name, buckets):
  scheds, static, varied = _case(name)
  a, b = make_quadratic(num_clients=N, dtype=np.float64)
  keys = jax.random.split(jax.random.key(3), 2)
  out = []
  for r, sched in enumerate(scheds):
    alg = afl_jax.algorithms.get(name, **static, **{k: v[r] for k, v in varied.items()})
    o, _, sim = run(
      alg, quadratic_problem(a, b), sched, {'x': jnp.ones(4, jnp.float64)}, key=keys[r],
      chunk_size=3, local_step_buckets=buckets,
    )  # fmt: skip
    assert sim.adaptive_steps
    out.append(o['params']['x'])
  return out


@pytest.mark.parametrize('name', ['fedbuff', 'asynflc_ef'])
def test_grouped_sweep_equals_runs_alone_and_padded_sweep(name, x64):
  grouped, hist = _sweep(name, 2)
  assert grouped.adaptive_steps and grouped.block_size * 2 == grouped.num_slots
  useful, computed = grouped.step_work
  padded, padded_hist = _sweep(name, 0)
  assert not padded.adaptive_steps
  assert computed < padded.step_work[1] and useful == padded.step_work[0]
  np.testing.assert_allclose(hist, padded_hist, rtol=0, atol=1e-12)
  for r, alone in enumerate(_alone(name, 2)):
    t = alone.shape[0]
    np.testing.assert_allclose(hist[r, :t], alone, rtol=0, atol=1e-12)
    assert np.max(np.abs(alone[-1] - 1.0)) > 1e-3  # it moved


def test_automatic_buckets_plan_over_all_replicas(x64):
  scheds, _, _ = _case('fedbuff')
  width = max(s.max_arrivals for s in scheds)
  b = engine.choose_step_blocks(scheds, 'per_job', width, 1)
  plan = engine.plan_slots(scheds, 'per_job', width, 1, None)
  assert plan[2] == (b > 1) and plan[0] // plan[1] == (b if plan[2] else 1)
  # one schedule: the plan a single run makes
  one = engine.plan_slots(scheds[0], 'per_job', scheds[0].max_arrivals, 1, None)
  sim = afl_jax.Simulator(
    afl_jax.algorithms.get('fedbuff'),
    quadratic_problem(*make_quadratic(num_clients=N, dtype=np.float64)),
    scheds[0],
  )
  assert one == (sim.num_slots, sim.block_size, sim.adaptive_steps)


def test_default_sweep_keeps_the_padded_path(x64):
  sim, _ = _sweep('fedbuff', 0)
  scheds, static, varied = _case('fedbuff')
  a, b = make_quadratic(num_clients=N, dtype=np.float64)
  default = simulator('fedbuff', quadratic_problem(a, b), scheds, 2, **static, **varied)
  assert not default.adaptive_steps
  assert (default.num_slots, default.block_size) == (sim.num_slots, sim.num_slots)
