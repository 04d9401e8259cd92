"""A :class:`afl_jax.Simulator` run chunk by chunk, for the tests and the helper scripts.

Imports JAX: a helper script that forces its host device count sets ``XLA_FLAGS`` first.
"""

import jax
import numpy as np
from jax.sharding import Mesh

import afl_jax


def chunks(sim, state, key):
  """Each chunk's ``(state, outputs)``, from ``state`` to the end of the schedule."""
  while sim.position(state) < sim.num_steps:
    state, out = sim.run_chunk(state, key)
    yield state, out


def run(alg, problem, sched, params0, *, devices=None, key=None, **options):
  """``Simulator(alg, problem, sched, record_params=True, **options)`` run from ``params0``.

  ``devices``: on a 'clients' mesh of these (default: the Simulator's mesh); ``key``:
  for init and every chunk (default ``jax.random.key(0)``).

  Returns:
    ``(outputs, final state, simulator)``, the chunks' outputs joined along the steps.
  """
  if devices is not None:
    options['mesh'] = Mesh(np.array(devices), ('clients',))
  key = jax.random.key(0) if key is None else key
  sim = afl_jax.Simulator(alg, problem, sched, record_params=True, **options)
  done = list(chunks(sim, sim.init(params0, key), key))
  outs = jax.tree.map(lambda *a: np.concatenate(a), *[out for _, out in done])
  return outs, done[-1][0], sim


def max_diff(xs, ys):
  """max |x - y| over pairs of arrays, in float64 (0 for empty ones)."""
  diffs = [
    np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))
    for x, y in zip(xs, ys, strict=True)
  ]
  return max((float(np.max(d)) for d in diffs if d.size), default=0.0)


def one_vs_all_devices(alg, problem, sched, params0, leaf, state=lambda s: s.clients, **options):
  """The same run on the first device and on all devices.

  Returns:
    ``(max |difference|`` over the history of ``params[leaf]`` and the leaves of
    ``state(final state)``, how far the 1-device run moved from ``params0[leaf]``,
    ``(1-device simulator, all-devices simulator))``.
  """
  runs = [
    run(alg, problem, sched, params0, devices=devices, **options)
    for devices in (jax.devices()[:1], jax.devices())
  ]
  (out1, s1, sim1), (out2, s2, sim2) = runs
  h1, h2 = out1['params'][leaf], out2['params'][leaf]
  diff = max(max_diff([h1], [h2]), max_diff(jax.tree.leaves(state(s1)), jax.tree.leaves(state(s2))))
  moved = float(np.max(np.abs(h1[-1] - np.asarray(params0[leaf]))))
  return diff, moved, (sim1, sim2)
