"""A sweep's replica r equals the same run alone (float64, to 1e-10), for every algorithm, with
one compile per sweep (``chex.assert_max_traces``); on 1 device and, through
tests/helpers/sweep_devices.py, with replicas or clients sharded over several."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helper_runs import run_helper
from helpers import sweep_cases
from jax.sharding import Mesh
from quadratic import make_quadratic, quadratic_loss

import afl_jax
from afl_jax.api import simulator
from afl_jax.core.simulator import stack_problems


@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_replica_equals_run_alone(name, x64):
  chex.clear_trace_counter()
  diff, moved = sweep_cases.run_case(name, wrap=lambda f: chex.assert_max_traces(f, n=1))
  assert moved > 1e-3, moved
  assert diff < 1e-10, diff


def test_sweeps_on_two_devices_match_single_device_runs(x64):
  sweeps = run_helper('sweep_devices.py', timeout=1800)
  assert {k for k in sweeps if k.endswith('/replicas')} == {
    f'{n}/replicas' for n in afl_jax.algorithms.names()
  }
  assert 'fedbuff/clients' in sweeps and 'masfl/clients' in sweeps
  for case, (hist, final) in sweeps.items():  # vs the runs alone (cached from above)
    diff, moved = sweep_cases.compare(case.split('/')[0], np.array(hist), np.array(final))
    assert moved > 1e-3, (case, moved)
    assert diff < 1e-10, (case, diff)


def _index_problem(index):
  """Shared samples; each client's rows are ``index[offset : offset + size]`` (full batch)."""
  x, y = make_quadratic(num_clients=1, rows=24, dtype=np.float64)
  size = 4

  def sample(shared, view, key):
    del key
    rows = jax.lax.dynamic_slice(shared['index'], (view['offset'],), (size,))
    return {'a': shared['a'][rows], 'b': shared['b'][rows]}

  return afl_jax.core.Problem(
    client_views={'offset': jnp.arange(6, dtype=jnp.int32) * size},
    shared={'a': jnp.asarray(x[0]), 'b': jnp.asarray(y[0]), 'index': jnp.asarray(index)},
    loss_fn=quadratic_loss,
    sample_fn=sample,
    num_clients=6,
  )


def test_per_replica_partitions_share_the_samples(x64):
  rng = np.random.default_rng(0)
  probs = [_index_problem(rng.permutation(24).astype(np.int32)) for _ in range(2)]
  probs[1] = probs[1].replace(
    loss_fn=probs[0].loss_fn,
    sample_fn=probs[0].sample_fn,
    shared={**probs[1].shared, 'a': probs[0].shared['a'], 'b': probs[0].shared['b']},
  )
  stacked, axes = stack_problems(probs)
  assert axes.shared == {'a': None, 'b': None, 'index': 0}
  sched = afl_jax.schedules.fedbuff(6, 3, 2, 5, local_steps=2, seed=0)
  keys = jax.random.split(jax.random.key(0), 2)
  p0 = {'x': jnp.zeros(4, jnp.float64)}
  res = afl_jax.sweep('fedbuff', probs, sched, p0, keys, client_lr=[0.1, 0.2])
  for r, lr in enumerate((0.1, 0.2)):
    alg = afl_jax.algorithms.make('fedbuff', client_lr=lr)
    alone = afl_jax.simulate(alg, probs[r], sched, p0, keys[r])
    np.testing.assert_allclose(res.params['x'][r], alone.params_history['x'][-1], atol=1e-12)
  assert not np.allclose(res.params['x'][0], res.params['x'][1])


def _sum_of_squares(a, b):
  return afl_jax.problems.from_loss(
    lambda p, d: jnp.sum((d['a'] @ p['x'] - d['b']) ** 2), {'a': a, 'b': b}
  )


def test_memory_grows_with_replicas_and_is_checked():
  """One device: R replicas are R times the per-replica state on top of the shared data."""
  from afl_jax.core.memory import InsufficientMemoryError

  a, b = make_quadratic(num_clients=6)
  prob = _sum_of_squares(a, b)
  sched = afl_jax.schedules.fedbuff(6, 3, 2, 4, seed=0)
  one = Mesh(np.array(jax.devices()[:1]), ('clients',))
  reports = []
  for r in (1, 2, 3):
    sim = simulator('fedavgm', prob, sched, r, client_lr=[0.1] * r, mesh=one)
    p0 = {'x': jnp.zeros((r, 4))}
    reports.append(sim.estimate(p0, jax.random.split(jax.random.key(0), r)))
  per = reports[1]['total'] - reports[0]['total']
  assert per > 0 and reports[2]['total'] - reports[1]['total'] == per  # linear in R
  assert reports[1]['server_state'] == 2 * reports[0]['server_state']  # params + momentum
  from afl_jax.core import memory

  assert memory.replicas_that_fit(reports[0], reports[1], 10 * per) == int(
    (0.9 * 10 * per - (reports[0]['total'] - per)) // per
  )
  sim = simulator('fedavgm', prob, sched, 2, client_lr=[0.1, 0.2], memory_limit_bytes=per)
  with pytest.raises(InsufficientMemoryError):
    sim.init({'x': jnp.zeros((2, 4))}, jax.random.split(jax.random.key(0), 2))


def test_client_blocks_leave_a_sweep_unchanged(x64):
  """Blocks of 2 of a step's 3 arrival slots (padded to 4): the same run to float64 round-off."""
  a, b = make_quadratic(num_clients=6, dtype=np.float64)
  prob = _sum_of_squares(a, b)
  sched = afl_jax.schedules.fedbuff(6, 4, 3, 6, local_steps=2, seed=0)
  keys = jax.random.split(jax.random.key(0), 2)
  p0 = {'x': jnp.zeros(4, jnp.float64)}
  run = lambda **kw: afl_jax.sweep('fedbuff', prob, sched, p0, keys, client_lr=[0.01, 0.02], **kw)
  whole, blocks = run(), run(client_block_size=2)

  plan = simulator('fedbuff', prob, sched, 2, client_lr=[0.01, 0.02], client_block_size=2)
  assert (plan.num_slots, plan.block_size) == (4, 2)  # two blocks of two slots
  assert blocks.params['x'].shape == (2, 4)
  assert np.abs(whole.params['x']).max() > 1e-3  # the runs moved
  np.testing.assert_allclose(blocks.params['x'], whole.params['x'], rtol=0, atol=1e-12)
