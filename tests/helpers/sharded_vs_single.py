"""Run with 4 forced CPU devices: compare a 4-device sharded run with a 1-device run.

Prints one JSON line {name: max_abs_difference}.
"""

import json
import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=4'

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from quadratic import logistic_problem  # noqa: E402

import afl_jax  # noqa: E402

assert len(jax.devices()) == 4, jax.devices()
N = 8
problem = logistic_problem(N, 16, 5)
p0 = {'w': jnp.zeros(5), 'b': jnp.zeros(())}
buffered = afl_jax.schedules.fedbuff(N, 5, 3, 12, local_steps=3, seed=0)  # M=3 -> 4 slots
windows = afl_jax.schedules.waiting_windows(
  N,
  10,
  window=1.0,
  durations=afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5),
  local_steps=2,
)
cases = {
  'fedbuff': (afl_jax.algorithms.get('fedbuff', client_lr=0.3), buffered),
  'asynfl': (afl_jax.algorithms.get('asynfl', client_lr=0.3, num_clients=N), windows),
  'asynflc_ef': (
    afl_jax.algorithms.get(
      'asynflc_ef', client_lr=0.3, num_clients=N, compressor='top_k', fraction=0.5
    ),
    windows,
  ),
}
if 'masfl' in afl_jax.algorithms.names():
  cases['masfl'] = (
    afl_jax.algorithms.get('masfl', client_lr=0.1, server_lr=0.5, beta=0.5),
    buffered,
  )
out = {}
for name, (alg, sched) in cases.items():
  runs = []
  for devices in (jax.devices()[:1], jax.devices()):
    sim = afl_jax.Simulator(
      alg,
      problem,
      sched,
      chunk_size=5,
      record_params=True,
      mesh=Mesh(np.array(devices), ('clients',)),
    )
    state = sim.init(p0, jax.random.key(0))
    hist = []
    while sim.position(state) < sched.num_steps:
      state, o = sim.run_chunk(state, jax.random.key(0))
      hist.append(np.asarray(o['params']['w']))
    clients = [np.asarray(v) for v in jax.tree.leaves(state.clients)]
    runs.append((np.concatenate(hist), clients, sim.num_devices))
  (h1, c1, d1), (h4, c4, d4) = runs
  assert (d1, d4) == (1, 4)
  diff = float(np.max(np.abs(h1 - h4)))
  for a, b in zip(c1, c4):
    a, b = a.astype(np.float64), b.astype(np.float64)
    diff = max(diff, float(np.max(np.abs(a - b))) if a.size else 0.0)
  out[name] = diff
  out[name + '_moved'] = float(np.max(np.abs(h1[-1])))
print(json.dumps(out))
