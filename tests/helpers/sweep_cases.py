"""Sweep cases of tests/sweep_test.py and helpers/sweep_devices.py: every algorithm on a float64
quadratic, two replicas differing in key, schedule (width, K, length) and every float
hyperparameter, and the same runs one at a time through ``afl_jax.simulate``."""

import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import algorithm_cases  # noqa: E402
from quadratic import make_quadratic, quadratic_problem  # noqa: E402

import afl_jax  # noqa: E402
from afl_jax.api import run, simulator  # noqa: E402

N = 6
T = 10  # the longer replica's steps (the other has 6; chunks of 3)
UNLABELED = np.random.default_rng(1).normal(size=(8, 4))  # float64, as the runs
CONTEXT = algorithm_cases.run_info(N, num_rounds=8, unlabeled_x=UNLABELED)
EXTRA = {**algorithm_cases.EXTRA, 'fedac': dict(server_lr=0.05)}
BASE = algorithm_cases.COMMON  # FedFa: a window of 2
STRUCTURAL = {'fraction'}  # Top-k's k = fraction * d is a shape: one value per compile


def hparams(name):
  """(static, per-replica): every float hyperparameter differs between the 2 replicas."""
  defaults = afl_jax.algorithms.settings(name)
  given = {k: v for k, v in {**BASE, **EXTRA.get(name, {})}.items() if k in defaults}
  static, varied = {}, {}
  for k, default in defaults.items():
    value = given.get(k, default)
    numeric = isinstance(default, float) or default is None
    if isinstance(value, float) and numeric and k not in STRUCTURAL:
      varied[k] = [value, value * 0.8]
    elif k in given:
      static[k] = value
  return static, varied


def schedules(algorithm):
  if algorithm.regime == 'always_on':
    d = afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5)
    return [
      afl_jax.schedules.waiting_windows(N, 6, window=1.0, durations=d, local_steps=2, seed=0),
      afl_jax.schedules.waiting_windows(N, T, window=0.8, durations=d, local_steps=3, seed=1),
    ]
  return [
    afl_jax.schedules.fedbuff(N, 3, 2, 6, local_steps=2, seed=0),
    # Random staleness gives clients overlapping jobs: rules that size state from the
    # schedule (MasFL's history of variates) must suit both replicas in one program.
    afl_jax.schedules.random_staleness(N, 3, T, window=3, local_steps=[1, 3, 2, 2, 1, 3], seed=1),
  ]


def problem():
  a, b = make_quadratic(num_clients=N, dtype=np.float64)
  return quadratic_problem(a, b)


KEYS_SEED = 3


def _setup(name):
  static, varied = hparams(name)
  template = afl_jax.algorithms.make(
    name, facts=CONTEXT, **static, **{k: v[0] for k, v in varied.items()}
  )
  return static, varied, schedules(template), problem()


@functools.cache
def alone_histories(name):
  """Each replica's params history run alone through ``afl_jax.simulate`` (1 device)."""
  static, varied, scheds, prob = _setup(name)
  keys = jax.random.split(jax.random.key(KEYS_SEED), 2)
  p0 = {'x': jnp.ones(4, jnp.float64)}
  out = []
  for r, sched in enumerate(scheds):
    alg = afl_jax.algorithms.make(
      name, facts=CONTEXT, **static, **{k: v[r] for k, v in varied.items()}
    )
    alone = afl_jax.simulate(alg, prob, sched, p0, keys[r], chunk_size=3)
    out.append(np.asarray(alone.params_history['x']))
  return out


def sweep_histories(name, mesh=None, wrap=None):
  """(params history [R, T, 4], final params [R, 4]) of the 2-replica sweep."""
  static, varied, scheds, prob = _setup(name)
  keys = jax.random.split(jax.random.key(KEYS_SEED), 2)
  p0 = {'x': jnp.ones(4, jnp.float64)}
  sim = simulator(
    name, prob, scheds, 2, run=CONTEXT, chunk_size=3, record_params=True, mesh=mesh,
    **static, **varied,
  )  # fmt: skip
  if wrap is not None:
    sim._chunk = wrap(sim._chunk)
  p0 = jax.tree.map(lambda x: jnp.stack([x, x]), p0)
  res = run(sim, p0, keys)
  assert res.params_history['x'].shape[:2] == (2, T)
  return np.asarray(res.params_history['x']), np.asarray(res.params['x'])


def compare(name, history, final):
  """Max |sweep - alone| over both replicas, and how far the runs moved from x0."""
  diff, moved = 0.0, 0.0
  for r, hist in enumerate(alone_histories(name)):
    t = hist.shape[0]
    diff = max(diff, float(np.max(np.abs(history[r, :t] - hist))))
    diff = max(diff, float(np.max(np.abs(final[r] - hist[-1]))))
    moved = max(moved, float(np.max(np.abs(hist[-1] - 1.0))))
  return diff, moved


def run_case(name, mesh=None, wrap=None):
  return compare(name, *sweep_histories(name, mesh=mesh, wrap=wrap))
