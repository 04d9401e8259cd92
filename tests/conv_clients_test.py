"""Clients whose model convolves, trained one at a time on CPU (engine.train_clients), give the
run of the clients vmapped through lax's convolution (float64: only the order of sums differs),
also as a sweep (2 devices: tests/helpers/two_devices.py)."""

import collections

import jax
import numpy as np
import pytest
from helpers.sim_runs import max_diff, run
from quadratic import conv_problem

import afl_jax
from afl_jax.core import simulator
from afl_jax.models import fast


@pytest.fixture
def decisions(monkeypatch):
  seen = []
  decide = fast.one_at_a_time
  monkeypatch.setattr(fast, 'one_at_a_time', lambda jaxpr: seen.append(decide(jaxpr)) or seen[-1])
  return seen


def _conv64():
  problem, params0 = conv_problem(6, 10)
  return problem, jax.tree.map(lambda p: p.astype(np.float64), params0)


def test_one_at_a_time_equals_vmapped_lax(decisions, monkeypatch):
  with jax.enable_x64(True):
    problem, params0 = _conv64()
    sched = afl_jax.schedules.fedbuff(6, 4, 3, 4, local_steps=2, seed=0)
    alg = afl_jax.algorithms.make('fedbuff', client_lr=0.5)
    one, *_ = run(alg, problem, sched, params0)
    assert decisions and all(decisions)
    monkeypatch.setattr(fast, 'PLATFORMS', ())  # lax.conv and reduce_window, vmapped
    monkeypatch.setattr(simulator, '_COMPILED', collections.OrderedDict())  # traced anew
    decisions.clear()
    lax_, *_ = run(alg, problem, sched, params0)
    assert decisions and not any(decisions)
  history = lambda out: jax.tree.leaves(out['params'])
  moved = max_diff([h[-1] for h in history(one)], jax.tree.leaves(params0))
  assert moved > 1e-2
  assert max_diff(history(one), history(lax_)) <= 1e-12


def test_sweep_of_convolving_clients_equals_its_runs(decisions):
  """Replicas vmapped over clients trained one at a time (each convolution loops over them)."""
  with jax.enable_x64(True):
    problem, params0 = _conv64()
    sched = afl_jax.schedules.fedbuff(6, 4, 3, 3, local_steps=2, seed=0)
    lrs = [0.2, 0.5]
    sim = afl_jax.api.simulator('fedbuff', problem, sched, len(lrs), client_lr=lrs)
    keys = jax.random.split(jax.random.key(0), len(lrs))
    state = sim.init(afl_jax.core.simulator.stack_trees([params0] * len(lrs)), keys)
    state, _ = sim.run_chunk(state, keys)
    swept = jax.tree.leaves(sim.params(state))
    assert decisions and all(decisions)
    for i, lr in enumerate(lrs):
      alone = afl_jax.algorithms.make('fedbuff', client_lr=lr)
      out, *_ = run(alone, problem, sched, params0, key=keys[i])
      last = [np.asarray(h)[-1] for h in jax.tree.leaves(out['params'])]
      assert max_diff([s[i] for s in swept], last) <= 1e-12, lr
