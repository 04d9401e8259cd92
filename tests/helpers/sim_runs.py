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
  """max |x - y| over pairs of arrays, in float64 (0 for empty ones)."""
  f64 = lambda a: np.asarray(a, np.float64)
  diffs = [float(np.max(np.abs(f64(x) - f64(y)), initial=0.0)) for x, y in zip(xs, ys, strict=True)]
  return max(diffs, default=0.0)


def one_vs_all_devices(alg, problem, sched, params0, leaf, state=lambda s: s.clients, **options):
  """The run on the first device and on all: ``(max |difference|`` over ``params[leaf]``'s history
  and ``state(final state)``, how far the 1-device run moved, ``(sim1, sim_all))``."""
  devices = (jax.devices()[:1], jax.devices())
  (out1, s1, sim1), (out2, s2, sim2) = [
    run(alg, problem, sched, params0, devices=d, **options) for d in devices
  ]
  h1, h2 = out1['params'][leaf], out2['params'][leaf]
  diff = max(max_diff([h1], [h2]), max_diff(jax.tree.leaves(state(s1)), jax.tree.leaves(state(s2))))
  moved = float(np.max(np.abs(h1[-1] - np.asarray(params0[leaf]))))
  return diff, moved, (sim1, sim2)
