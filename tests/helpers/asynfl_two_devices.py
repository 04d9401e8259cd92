"""Run with 2 forced CPU devices: AsynFL with N=3 and N=5 clients on 2 devices vs 1.

The engine pads the arrival axis to a multiple of the device count (N=3 -> 4 slots,
N=5 -> 6); no rule may see the padding. Prints one JSON line {case: max_abs_diff}
plus {case_moved: how far the 1-device run moved}.
"""

import json
import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=2'

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from helpers.sim_runs import one_vs_all_devices  # noqa: E402
from quadratic import quadratic_problem  # noqa: E402

import afl_jax  # noqa: E402

jax.config.update('jax_enable_x64', True)
assert len(jax.devices()) == 2, jax.devices()

out = {}
for n in (3, 5):
  rng = np.random.default_rng(n)
  problem = quadratic_problem(rng.normal(size=(n, 6, 4)) / 3.0, rng.normal(size=(n, 6)))
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
    'asynflc_ef_top_k': (dict(compressor='top_k', fraction=0.5), windows),
  }
  for case, (hp, sched) in cases.items():
    name = 'asynflc_ef' if case.startswith('asynflc_ef') else 'asynfl'
    alg = afl_jax.algorithms.get(name, client_lr=0.2, num_clients=n, **hp)
    diff, moved, (_, sim) = one_vs_all_devices(
      alg,
      problem,
      sched,
      {'x': jnp.linspace(-1.0, 1.0, 4)},
      'x',
      state=lambda s: (s.clients, s.compressor),
      chunk_size=3,
    )
    assert sim.num_slots > n or n % 2 == 0, (case, n, sim.num_slots)
    out[f'{case}_n{n}'] = diff
    out[f'{case}_n{n}_moved'] = moved
print(json.dumps(out))
