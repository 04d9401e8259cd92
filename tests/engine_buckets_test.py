"""Arrivals grouped by K (``Simulator(local_step_buckets=...)``) give the padded run.

The engine sorts a step's arrival slots by K into blocks and bounds each block's
local loop by its largest K; the skipped steps are masked no-ops, so the iterates
must equal the padded path (every slot runs the schedule's largest K) up to round-off:
the two programs batch the same products at different widths.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from algorithm_cases import build, run_info
from helper_runs import run_helper
from helpers.sim_runs import run
from quadratic import make_quadratic, quadratic_problem
from same import assert_close_ulps

import afl_jax
from afl_jax.core import engine

N = 8


def _schedule():
  """Heterogeneous K: 4 arrivals a step, K = 1..4 drawn per arrival."""
  return afl_jax.schedules.random_staleness(
    N, 4, 6, window=3, local_steps=1, local_steps_multipliers=range(1, 5), seed=2
  )


def _run(alg, sched, dtype, **kw):
  a, b = make_quadratic(num_clients=N, dtype=dtype)
  out, _, sim = run(alg, quadratic_problem(a, b), sched, {'x': jnp.ones(4, dtype)}, **kw)
  return sim, out


@pytest.mark.parametrize('name', ['masfl', 'fedbuff_nova'])
def test_grouped_by_k_equals_padded_float64(name, x64):
  """MasFL (client state, causal variates) and FedNova-style (message / K); local SGD:
  the always-on and 2-device tests below."""
  alg = build(name, run_info(N))
  sched = _schedule()
  _, ref = _run(alg, sched, np.float64, local_step_buckets=0)
  sim, out = _run(alg, sched, np.float64)  # default: sorted into blocks (here 2 of 2 slots)
  assert sim.adaptive_steps and sim.num_slots // sim.block_size == 2
  np.testing.assert_allclose(out['params']['x'], ref['params']['x'], rtol=0, atol=1e-12)
  for k, v in ref['metrics'].items():
    np.testing.assert_allclose(out['metrics'][k], v, rtol=1e-12, atol=1e-12, err_msg=k)
  assert np.abs(ref['params']['x'] - 1.0).max() > 1e-3  # the run moved


def test_grouped_by_k_equals_padded_in_float32():
  """Local SGD's float32 iterates are those of the padded path to a few ulps.

  The block width changes the shapes XLA compiles (and so its reduction order, vector
  width and fused multiply-adds, per CPU model and per accelerator): round-off only.
  """
  alg = build('fedbuff', run_info(N))
  _, ref = _run(alg, _schedule(), np.float32, local_step_buckets=0)
  for buckets in (1, 2):
    _, out = _run(alg, _schedule(), np.float32, local_step_buckets=buckets)
    # Round-off of another batching width: 4 ulps of the values' scale per server step.
    assert_close_ulps(out['params']['x'], ref['params']['x'], ulps=4 * _schedule().num_steps)
    np.testing.assert_array_equal(out['metrics']['bits_up'], ref['metrics']['bits_up'])


def test_always_on_clients_grouped_by_their_k(x64):
  """AsynFL: every client trains every step with its own K_i; sorted blocks change nothing."""
  durations = afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5)
  sched = afl_jax.schedules.waiting_windows(
    N, 5, window=1.0, durations=durations, local_steps=np.array([1, 4, 2, 1, 3, 1, 4, 2]), seed=0
  )
  alg = afl_jax.algorithms.get('asynfl', client_lr=0.05, num_clients=N)
  _, ref = _run(alg, sched, np.float64, local_step_buckets=0)
  sim, out = _run(alg, sched, np.float64, local_step_buckets=2)
  assert sim.adaptive_steps and sim.step_work == (18 * 5, (4 + 2) * 4 * 5)
  np.testing.assert_allclose(out['params']['x'], ref['params']['x'], rtol=0, atol=1e-12)


def test_useful_step_accounting():
  """Closed form on a 2-step schedule: K = (4, 1, 1, 1) and (2, 2, 1, -)."""
  sched = afl_jax.schedules.Schedule(
    client_ids=np.array([[0, 1, 2, 3], [4, 5, 6, 0]]),
    start_step=np.zeros((2, 4), np.int32),
    local_steps=np.array([[1, 4, 1, 1], [2, 1, 2, 1]]),
    mask=np.array([[True] * 4, [True, True, True, False]]),
    wall_clock=np.arange(2.0),
    num_clients=8,
  )
  useful = 7 + 5
  assert engine.local_step_work(sched, 'per_job', 4, 1, False) == (useful, 2 * 4 * 4)
  # one block: each step runs its own max K: 4 * 4 + 4 * 2
  assert engine.local_step_work(sched, 'per_job', 4, 1, True) == (useful, 24)
  # two blocks of 2 sorted slots: (4, 1 | 1, 1) -> 2 * (4 + 1); (2, 2 | 1, 0) -> 2 * (2 + 1)
  assert engine.local_step_work(sched, 'per_job', 4, 2, True) == (useful, 16)
  assert engine.local_step_work(sched, 'per_job', 4, 4, True) == (useful, useful)
  # Blocks keep >= 2 slots a device: 2 blocks (75%) are the best on offer for 90%;
  # one block (50%) is enough for a 50% target; 2 devices leave one block of 4.
  assert engine.choose_step_blocks(sched, 'per_job', 4, 1) == 2
  assert engine.choose_step_blocks(sched, 'per_job', 4, 1, target=0.5) == 1
  assert engine.choose_step_blocks(sched, 'per_job', 4, 2) == 1


def test_auto_pads_on_accelerators_and_groups_on_cpu():
  """The automatic choice groups by K on CPU only: an accelerator runs the padded lanes in
  parallel, and blocks run one after another measured slower there."""
  sched = _schedule()
  cpu = engine.plan_slots(sched, 'per_job', 4, 1, None, platform='cpu')
  assert cpu == (4, 2, True)
  for platform in ('gpu', 'tpu'):
    assert engine.plan_slots(sched, 'per_job', 4, 1, None, platform=platform) == (4, 4, False)
    # an explicit B still groups; client_block_size blocks still run their own K
    assert engine.plan_slots(sched, 'per_job', 4, 1, 2, platform=platform) == (4, 2, True)
    assert engine.plan_slots(sched, 'per_job', 4, 1, None, 2, platform) == (4, 2, True)


def test_auto_keeps_the_padded_path_when_k_is_constant():
  a, b = make_quadratic(num_clients=N)
  sched = afl_jax.schedules.fedbuff(N, 5, 4, 6, local_steps=3, seed=0)
  sim = afl_jax.Simulator(build('fedbuff', run_info(N)), quadratic_problem(a, b), sched)
  assert not sim.adaptive_steps
  assert sim.num_slots == sim.block_size == 4
  with pytest.raises(ValueError, match='local_step_buckets'):
    afl_jax.Simulator(
      build('fedbuff', run_info(N)), quadratic_problem(a, b), sched, local_step_buckets=-1
    )


def test_grouped_by_k_on_two_devices():
  result = run_helper('buckets_two_devices.py', timeout=300)
  assert result['blocks'] == 2  # 4 slots in 2 blocks, one slot per device each
  assert result['diff'] <= 1e-12
