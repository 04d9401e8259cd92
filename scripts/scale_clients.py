"""Many clients with per-client error-feedback state: AsynFLC-EF on Fashion-MNIST.

  python scripts/scale_clients.py --num_clients=100000 --steps=5 --write_docs

Logistic regression (7,850 parameters), AsynFLC-EF with Top-3% (every client trains
every step on its own local model; each keeps an anchor and an error-feedback
residual: three model-sized vectors per client), waiting-window participation.
Fashion-MNIST has 60,000 training images, fewer than the clients, so each client
owns a window of ``--client_size`` consecutive images of the label-sorted training
set (windows overlap; label-sorted makes them non-IID). Clients are trained in
blocks of ``--block`` to bound temporaries. Prints the analytic state size, the peak
resident memory, seconds per server step and the test accuracy.
"""

import json
import os
import pathlib
import resource
import time

from absl import flags

from afl_jax.pipeline import cli, devices
from afl_jax.pipeline import workdir as workdir_lib

devices.set_cpu_devices()  # before JAX starts its backend; importing afl_jax sets nothing

_N = flags.DEFINE_integer('num_clients', 100_000, 'Number of clients N.', lower_bound=1)
_STEPS = flags.DEFINE_integer('steps', 5, 'Server steps.', lower_bound=1)
_BLOCK = flags.DEFINE_integer(
  'block', 10_000, 'Clients trained together (client_block_size).', lower_bound=1
)
_K = flags.DEFINE_integer('local_steps', 2, 'Local steps per server step.', lower_bound=1)
_BATCH = flags.DEFINE_integer('batch_size', 16, 'Local batch size.', lower_bound=1)
_SIZE = flags.DEFINE_integer('client_size', 32, 'Images per client window.', lower_bound=1)
_WRITE_DOCS = flags.DEFINE_bool('write_docs', False, 'Write docs/scale.md.')


def main(argv):
  del argv
  import jax
  import jax.numpy as jnp
  import numpy as np
  import pandas as pd

  import afl_jax
  from afl_jax import data, models
  from afl_jax.core import memory
  from afl_jax.pipeline import task

  n, size = _N.value, _SIZE.value
  ds = data.load_fashion_mnist()
  order = np.argsort(ds.train_y, kind='stable')
  norm = data.federated.normalizer(ds.train_x)
  x, y = norm(ds.train_x[order]), ds.train_y[order].astype(np.int32)
  offsets = ((np.arange(n, dtype=np.int64) * (len(y) - size)) // max(n - 1, 1)).astype(np.int32)
  sizes = np.full(n, size, np.int32)
  layout = data.grouped(
    x, y, offsets, sizes, norm(ds.test_x), ds.test_y.astype(np.int32), x[:0], 10
  )
  model = models.make('logreg', num_classes=10)
  params = model.init(jax.random.key(0), jnp.zeros((1, 28, 28)))
  problem = task.make_problem(layout, model.apply, _BATCH.value, jnp.float32)
  durations = afl_jax.schedules.durations.make('normal', mean=1.5, std=0.5)
  t0 = time.perf_counter()
  schedule = afl_jax.schedules.waiting_windows(
    n, _STEPS.value, window=1.0, durations=durations, local_steps=_K.value, seed=0
  )
  schedule_s = time.perf_counter() - t0
  alg = afl_jax.algorithms.make(
    'asynflc_ef', client_lr=0.05, server_lr=1.0, num_clients=n, compressor='top_k', fraction=0.03
  )
  sim = afl_jax.Simulator(alg, problem, schedule, chunk_size=1, client_block_size=_BLOCK.value)
  key = jax.random.key(0)
  state = sim.init(params, key)
  print(memory.format_report(sim.memory), flush=True)
  evaluate = task.make_evaluator(model.apply, layout, seed=0, train_samples=5000, dtype=jnp.float32)
  times = []  # the first includes the compile
  while sim.position(state) < schedule.num_steps:
    t0 = time.perf_counter()
    state, out = jax.block_until_ready(sim.run_chunk(state, key))
    times.append(time.perf_counter() - t0)
    print(
      f'step {sim.position(state)}: {times[-1]:.1f}s, {int(out["metrics"]["arrivals"][0])} reports',
      flush=True,
    )
  step_s = float(np.median(times[1:])) if len(times) > 1 else None
  peak = devices.peak_device_bytes()
  result = {
    'num_clients': n,
    'params': models.count_params(params),
    'steps': schedule.num_steps,
    'reports_per_step': float(schedule.arrivals_per_step.mean()),
    'local_steps': _K.value,
    'batch_size': _BATCH.value,
    'client_block_size': _BLOCK.value,
    'analytic_state_gib': sim.memory['total'] / 2**30,
    'per_client_state_gib': sim.memory['per_client_state'] / 2**30,
    'peak_rss_gib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    'peak_device_gib': None if peak is None else peak / 2**30,  # None on CPU: peak_rss_gib
    'first_step_s_with_compile': times[0],
    'step_s': step_s,
    'client_updates_per_s': n / step_s if step_s else None,
    'schedule_build_s': schedule_s,
    'test_accuracy': evaluate(sim.params(state))['test_accuracy'],
    'devices': len(jax.devices()),
    'device': devices.device_kind(),
    'jax': jax.__version__,
  }
  if _WRITE_DOCS.value:
    values = pd.Series(result).map(lambda v: f'{v:.4g}' if isinstance(v, float) else str(v))
    table = values.rename_axis('quantity').reset_index(name='value')
    workdir_lib.write_text(  # a temporary, then a rename; never through a link
      pathlib.Path(__file__).parent.parent / 'docs' / 'scale.md',
      '# 100,000 clients with per-client error-feedback state\n\n'
      f'`python scripts/scale_clients.py --num_clients={n} --steps={_STEPS.value} '
      f'--write_docs` on {os.cpu_count()} CPU cores, JAX {jax.__version__} '
      f'({jax.default_backend()}), {time.strftime("%Y-%m-%d")}.\n\n'
      'See the script docstring for the setup.\n\n'
      f'{table.to_markdown(index=False, disable_numparse=True)}\n',
    )
  print(json.dumps(result))


if __name__ == '__main__':
  cli.run(main)
