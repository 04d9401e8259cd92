"""Engine throughput: client updates per second on a fixed task, compile time apart.

Task (issue #2): FedBuff, MLP 784-200-200-10, batch 32, K=10 local steps, N=100
clients, Mc=20, M=10, 50 server steps (500 client updates). Data are random
images of FMNIST's shape (throughput does not depend on pixel values). The last
line printed is one JSON object with at least ``updates_per_s`` and ``compile_s``.

  python scripts/benchmark.py [--repeats=3] [--steps=50]
"""

import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

import afl_jax
from afl_jax import data, experiment, models

_REPEATS = flags.DEFINE_integer('repeats', 3, 'Timed repetitions (best is reported).')
_STEPS = flags.DEFINE_integer('steps', 50, 'Server steps per repetition.')

N, MC, M, K, BATCH, SAMPLES = 100, 20, 10, 10, 32, 60000


def mlp_flops_per_update(batch: int, k: int) -> float:
  """Forward + backward matmul FLOPs of MLP 784-200-200-10 for one client job."""
  macs = 784 * 200 + 200 * 200 + 200 * 10
  return 3 * 2 * macs * batch * k  # backward ~ 2x forward


def main(argv):
  del argv
  rng = np.random.default_rng(0)
  x = rng.normal(size=(SAMPLES, 28, 28)).astype(np.float32)
  y = rng.integers(0, 10, size=SAMPLES).astype(np.int32)
  sizes = np.full(N, SAMPLES // N, np.int32)
  fed = data.FederatedData(x, y, np.arange(N, dtype=np.int32) * sizes[0], sizes, x[:10],
                           y[:10], x[:0], 10)
  model = models.get_model('mlp', 10)
  params = model.init(jax.random.key(0), jnp.zeros((1, 28, 28)))
  problem = experiment.build_problem(fed, model.apply, BATCH, jnp.float32)
  steps = _STEPS.value
  schedule = afl_jax.schedules.fedbuff(N, MC, M, steps, local_steps=K, seed=0)
  alg = afl_jax.algorithms.get('fedbuff', client_lr=0.01, server_lr=1.0)
  sim = afl_jax.Simulator(alg, problem, schedule, chunk_size=steps)
  key = jax.random.key(0)
  state = sim.init(params, key)
  inputs = sim.inputs(0)
  t0 = time.perf_counter()
  compiled = sim.runner().lower(state, inputs, sim.problem, key).compile()
  compile_s = time.perf_counter() - t0
  times = []
  for _ in range(_REPEATS.value):
    state = sim.init(params, key)
    jax.block_until_ready(state)
    t0 = time.perf_counter()
    state, out = compiled(state, inputs, sim.problem, key)
    jax.block_until_ready(state)
    times.append(time.perf_counter() - t0)
  best = min(times)
  updates = steps * M
  flops = mlp_flops_per_update(BATCH, K) * updates
  result = {
      'task': 'fedbuff mlp784-200-200-10 b32 K10 N100 Mc20 M10',
      'steps': steps, 'client_updates': updates,
      'updates_per_s': updates / best, 'gflops_per_s': flops / best / 1e9,
      'run_s_best': best, 'run_s_all': times, 'compile_s': compile_s,
      'devices': [str(d) for d in jax.devices()], 'jax': jax.__version__,
  }
  print(f'{updates} client updates in {best:.3f}s (best of {len(times)}): '
        f'{updates / best:.1f} updates/s, {flops / best / 1e9:.1f} GFLOP/s; '
        f'compile {compile_s:.2f}s')
  print(json.dumps(result))


if __name__ == '__main__':
  app.run(main)
