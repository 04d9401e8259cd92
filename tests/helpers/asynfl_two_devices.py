"""Run with 2 forced CPU devices: AsynFL with N=3 and N=5 clients on 2 devices vs 1.

The engine pads the arrival axis to a multiple of the device count (N=3 -> 4 slots,
N=5 -> 6); no rule may see the padding. Prints one JSON line {case: max_abs_diff}
plus {case_moved: how far the 1-device run moved}.
"""

import json
import os

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=2'

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

import afl_jax  # noqa: E402

jax.config.update('jax_enable_x64', True)
assert len(jax.devices()) == 2, jax.devices()


def loss(p, batch):
  r = batch['a'] @ p['x'] - batch['b']
  return 0.5 * jnp.sum(r * r)


out = {}
for n in (3, 5):
  rng = np.random.default_rng(n)
  problem = afl_jax.problems.from_loss(
    loss, {'a': rng.normal(size=(n, 6, 4)) / 3.0, 'b': rng.normal(size=(n, 6))}
  )
  windows = afl_jax.schedules.waiting_windows(
    n,
    8,
    window=1.0,
    durations=afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5),
    local_steps=2,
    seed=n,
  )
  # Every client in every step: padded M (4 or 6) exceeds N for per-job training.
  full = afl_jax.schedules.from_arrays(
    [list(range(n))] * 4, [[t] * n for t in range(4)], local_steps=2, num_clients=n
  )
  cases = {
    'asynfl': (dict(), windows),
    'asynfl_arrivals': (dict(normalizer='arrivals'), windows),
    'asynfl_per_job_full': (dict(local_training='per_job'), full),
    'asynflc_ef_sign': (dict(compressor='sign'), windows),
  }
  for case, (hp, sched) in cases.items():
    name = 'asynflc_ef' if case.startswith('asynflc_ef') else 'asynfl'
    alg = afl_jax.algorithms.get(name, client_lr=0.2, num_clients=n, **hp)
    runs = []
    for devices in (jax.devices()[:1], jax.devices()):
      sim = afl_jax.Simulator(
        alg,
        problem,
        sched,
        chunk_size=3,
        record_params=True,
        mesh=Mesh(np.array(devices), ('clients',)),
      )
      state = sim.init({'x': jnp.linspace(-1.0, 1.0, 4)}, jax.random.key(0))
      hist = []
      while sim.position(state) < sched.num_steps:
        state, o = sim.run_chunk(state, jax.random.key(0))
        hist.append(np.asarray(o['params']['x']))
      leaves = [
        np.asarray(v, np.float64) for v in jax.tree.leaves((state.clients, state.compressor))
      ]
      runs.append((np.concatenate(hist), leaves, sim.num_slots))
    (h1, c1, s1), (h2, c2, s2) = runs
    assert s2 > n or n % 2 == 0, (case, n, s2)
    diff = float(np.max(np.abs(h1 - h2)))
    for a, b in zip(c1, c2, strict=True):
      diff = max(diff, float(np.max(np.abs(a - b))) if a.size else 0.0)
    out[f'{case}_n{n}'] = diff
    out[f'{case}_n{n}_moved'] = float(np.max(np.abs(h1[-1] - np.linspace(-1.0, 1.0, 4))))
print(json.dumps(out))
