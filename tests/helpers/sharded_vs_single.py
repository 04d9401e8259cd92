"""Run with 4 forced CPU devices: compare a 4-device sharded run with a 1-device run.

Prints one JSON line {name: max_abs_difference}.
"""

import json
import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=4'

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from helpers.sim_runs import one_vs_all_devices  # noqa: E402
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
  diff, moved, sims = one_vs_all_devices(alg, problem, sched, p0, 'w', chunk_size=5)
  assert [sim.num_devices for sim in sims] == [1, 4]
  out[name] = diff
  out[name + '_moved'] = moved
print(json.dumps(out))
