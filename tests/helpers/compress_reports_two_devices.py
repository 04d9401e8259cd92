"""Run with 2 forced CPU devices: AsynFLC-EF (Top-k) with N=5 clients, reports-only compression.

N = 5 is not divisible by 2 devices (6 slots, replicated client state). Compares the
reports-only path (engine.compress_reports) with compressing every slot on 2 devices,
and 2 devices with 1. Prints one JSON line.
"""

import json
import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=2'

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from helpers.sim_runs import max_diff, run  # noqa: E402
from quadratic import quadratic_problem  # noqa: E402

import afl_jax  # noqa: E402
from afl_jax.core import engine  # noqa: E402

jax.config.update('jax_enable_x64', True)
assert len(jax.devices()) == 2, jax.devices()
N = 5
rng = np.random.default_rng(N)
problem = quadratic_problem(rng.normal(size=(N, 6, 4)) / 3.0, rng.normal(size=(N, 6)))
sched = afl_jax.schedules.waiting_windows(
  N,
  10,
  window=1.0,
  durations=afl_jax.schedules.durations.make('normal', mean=2.2, std=1.0),
  local_steps=2,
  seed=1,
)
assert sched.mask.sum(axis=1).min() == 0, sched.mask.sum(axis=1)
alg = afl_jax.algorithms.get(
  'asynflc_ef', client_lr=0.2, num_clients=N, compressor='top_k', fraction=0.5
)


def run_on(devices, reports_only):
  out, state, sim = run(
    alg,
    problem,
    sched,
    {'x': jnp.linspace(-1.0, 1.0, 4)},
    devices=devices,
    chunk_size=4,
    compress_reports_only=reports_only,
  )
  res = np.asarray(engine.to_host(state.compressor.residual['x']), np.float64)
  return out['params']['x'], res, sim


h_new, r_new, sim = run_on(jax.devices(), True)
h_old, r_old, _ = run_on(jax.devices(), False)
h_one, r_one, _ = run_on(jax.devices()[:1], True)
out = {
  'report_slots': sim.report_slots,
  'reports_vs_full_2dev': max_diff([h_new, r_new], [h_old, r_old]),
  'two_vs_one_device': max_diff([h_new, r_new], [h_one, r_one]),
  'moved': float(np.max(np.abs(h_new[-1] - np.linspace(-1.0, 1.0, 4)))),
}
print(json.dumps(out))
