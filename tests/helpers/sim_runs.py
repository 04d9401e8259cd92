"""A Simulator run chunk by chunk (a script forcing its device count sets ``XLA_FLAGS`` first)."""

import jax
import numpy as np
from jax.sharding import Mesh

import afl_jax


def chunks(sim, state, key):
  while sim.position(state) < sim.num_steps:
    state, out = sim.run_chunk(state, key)
    yield state, out


def run(alg, problem, sched, params0, *, devices=None, key=None, **options):
  """``(outputs joined over the chunks, final state, simulator)`` of ``Simulator(alg, problem,
  sched, record_params=True, **options)`` from ``params0``, on a mesh of ``devices`` if given."""
  if devices is not None:
    options['mesh'] = Mesh(np.array(devices), ('clients',))
  key = jax.random.key(0) if key is None else key
  sim = afl_jax.Simulator(alg, problem, sched, record_params=True, **options)
  done = list(chunks(sim, sim.init(params0, key), key))
  outs = jax.tree.map(lambda *a: np.concatenate(a), *[out for _, out in done])
  return outs, done[-1][0], sim


def windows(n, steps, window=1.0, seed=0, local_steps=1):
  """AsynFL's waiting windows over N clients whose jobs take Uniform(0.3, 2.5)."""
  durations = afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5)
  return afl_jax.schedules.waiting_windows(
    n, steps, window=window, durations=durations, local_steps=local_steps, seed=seed
  )


def max_diff(xs, ys):
  """max |x - y| over pairs of arrays, in float64 (0 for empty ones; NaN wherever one is)."""
  f64 = lambda a: np.asarray(a, np.float64)
  diffs = [float(np.max(np.abs(f64(x) - f64(y)), initial=0.0)) for x, y in zip(xs, ys, strict=True)]
  return float(np.max(diffs, initial=0.0))  # not max(): a NaN after a number would be lost
