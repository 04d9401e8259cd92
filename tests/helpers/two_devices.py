"""Run with 2 forced CPU devices: runs on 2 devices vs the same runs on 1 (float64).

N = 8 (client state sharded; M = 3 padded to 4) for FedBuff, MasFL, AsynFL and AsynFLC-EF;
FedBuff with a convolving model (clients one at a time, each device its own slots; also N = 5,
which the devices do not divide); AsynFL with N = 3 and 5 (4 and 6 slots, which no rule may see);
FedBuff grouped by K (2 blocks) vs padded, both on 2 devices. Prints one JSON line {case: max
|difference|, case_moved: how far the reference run moved}.
"""

import json
import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=2'

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from algorithm_cases import build, run_info  # noqa: E402
from helpers.sim_runs import max_diff, run, windows  # noqa: E402
from quadratic import conv_problem, logistic_problem, make_quadratic, quadratic_problem  # noqa: E402

import afl_jax  # noqa: E402

jax.config.update('jax_enable_x64', True)
assert len(jax.devices()) == 2, jax.devices()
get = afl_jax.algorithms.make
out = {}


def compare(case, alg, problem, sched, params0, state=lambda s: s.clients, **options):
  """The run on the first device and on all: max |difference| over the params' history and
  ``state(final state)``, and how far the 1-device run moved."""
  (out1, s1, _), (out2, s2, sim) = [
    run(alg, problem, sched, params0, devices=d, **options)
    for d in (jax.devices()[:1], jax.devices())
  ]
  assert sim.num_devices == 2
  h1, h2 = jax.tree.leaves(out1['params']), jax.tree.leaves(out2['params'])
  out[case] = max(
    max_diff(h1, h2), max_diff(jax.tree.leaves(state(s1)), jax.tree.leaves(state(s2)))
  )
  out[f'{case}_moved'] = max_diff([h[-1] for h in h1], jax.tree.leaves(params0))
  return sim


buffered = afl_jax.schedules.fedbuff(8, 5, 3, 12, local_steps=3, seed=0)
sharded = {
  'fedbuff': (get('fedbuff', client_lr=0.3), buffered),
  'masfl': (get('masfl', client_lr=0.1, server_lr=0.5, beta=0.5), buffered),
  'asynfl': (get('asynfl', client_lr=0.3, num_clients=8), windows(8, 10, local_steps=2)),
  'asynflc_ef': (
    get('asynflc_ef', client_lr=0.3, num_clients=8, compressor='top_k', fraction=0.5),
    windows(8, 10, local_steps=2),
  ),
}
p0 = {'w': jnp.zeros(5), 'b': jnp.zeros(())}
for case, (alg, sched) in sharded.items():
  compare(f'{case}_n8', alg, logistic_problem(8, 16, 5), sched, p0, chunk_size=5)

alg = get('fedbuff', client_lr=0.5)
conv_schedules = {8: buffered, 5: afl_jax.schedules.fedbuff(5, 3, 3, 8, local_steps=2, seed=1)}
for n, sched in conv_schedules.items():  # N = 5: the client state replicated, slots sharded
  problem, p0 = conv_problem(n, 10)
  p0 = jax.tree.map(lambda p: p.astype(jnp.float64), p0)
  assert compare(f'fedbuff_cnn_n{n}', alg, problem, sched, p0).num_slots == 4

for n in (3, 5):
  rng = np.random.default_rng(n)
  problem = quadratic_problem(rng.normal(size=(n, 6, 4)) / 3.0, rng.normal(size=(n, 6)))
  # Every client in every step: padded M (4 or 6) exceeds N for per-job training.
  full = afl_jax.schedules.from_arrays(
    [list(range(n))] * 4, [[t] * n for t in range(4)], local_steps=2, num_clients=n
  )
  cases = {
    'asynfl': (dict(), windows(n, 8, seed=n, local_steps=2)),
    'asynfl_arrivals': (dict(normalizer='arrivals'), windows(n, 8, seed=n, local_steps=2)),
    'asynfl_per_job_full': (dict(local_training='per_job'), full),
    'asynflc_ef_sign': (dict(compressor='sign'), windows(n, 8, seed=n, local_steps=2)),
    'asynflc_ef_top_k': (
      dict(compressor='top_k', fraction=0.5),
      windows(n, 8, seed=n, local_steps=2),
    ),
  }
  for case, (hp, sched) in cases.items():
    name = 'asynflc_ef' if case.startswith('asynflc_ef') else 'asynfl'
    alg = get(name, client_lr=0.2, num_clients=n, **hp)
    p0, state = {'x': jnp.linspace(-1.0, 1.0, 4)}, lambda s: (s.clients, s.compressor)
    sim = compare(f'{case}_n{n}', alg, problem, sched, p0, state=state, chunk_size=3)
    assert sim.num_slots > n, (case, n, sim.num_slots)

# grouped by K: 4 slots in 2 blocks, one slot per device each
problem = quadratic_problem(*make_quadratic(num_clients=8, dtype=np.float64))
sched = afl_jax.schedules.random_staleness(
  8, 4, 6, window=3, local_steps=1, local_steps_multipliers=range(1, 5), seed=2
)
p0, alg = {'x': jnp.ones(4)}, build('fedbuff', run_info(8))
(padded, _, _), (grouped, _, sim) = [
  run(alg, problem, sched, p0, local_step_buckets=b) for b in (0, 2)
]
assert sim.num_devices == 2 and sim.block_size == 2 and sim.adaptive_steps
out['fedbuff_buckets_n8'] = max_diff([padded['params']['x']], [grouped['params']['x']])
out['fedbuff_buckets_n8_moved'] = max_diff([padded['params']['x'][-1]], [p0['x']])
print(json.dumps(out))
