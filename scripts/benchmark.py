"""Engine throughput, compile time, matrix-product ceiling, device scaling, peak memory.

  python scripts/benchmark.py                       # all tasks, 1/2/4 host devices
  python scripts/benchmark.py --tasks=fedbuff --devices=1 --repeats=3
  python scripts/benchmark.py --write_docs          # also rewrite docs/performance.md
  python scripts/benchmark.py --tasks=fedbuff,many_clients --repeats=3 \
      --torch_python=../torch-venv/bin/python --torch_bench_dir=DIR  # + the PyTorch loops

Tasks (client updates = local jobs of K steps):
  fedbuff       FedBuff, MLP 784-200-200-10, batch 32, K=10, N=100, Mc=20, M=10, 50 steps
  many_clients  FedBuff, MLP 784-32-10, batch 32, K=10, N=10,000, Mc=2,000, M=1,000, 10 steps
  always_on     AsynFL (every client trains every step), MLP 784-32-10, batch 32, K=10,
                N=1,000, waiting windows, 10 steps
  sweep         16 short FedBuff runs (4 client learning rates x 4 seeds: keys and
                schedules), N=100, Mc=20, M=10, K=10, 20 steps, as ONE compiled sweep
                (afl_jax.sweep, replicas sharded over the devices) vs the same 16 runs
                one after another (a Simulator each), in the same process; logistic
                regression and the MLP 784-200-200-10. Also: the largest number of
                replicas of the default task (FedBuff, N=100, MLP, FMNIST, 200 steps)
                whose analytic memory fits in 24 GiB.
  hetero_k      heterogeneous local steps, padded path (every arrival runs the schedule's
                largest K, masked) vs arrivals grouped by K (``local_step_buckets``: sorted
                into blocks, each running its own largest K), in the same process, best of
                ``--repeats`` alternating runs; MLP 784-200-200-10, batch 32, 1 device:
                dirichlet_epochs  FedBuff, N=100 clients of Dirichlet(0.5) sizes (6,000
                                  samples), 2 local epochs: K_i = 2 * ceil(n_i / 32);
                                  Mc=40, M=20, 20 steps
                fedgm_random_k    Autonomous FedGM, random staleness (window 5), N=100,
                                  S=10 a step, K = 2 * e, e uniform in 1..6; 30 steps
                Reports the useful-step fraction (sum of K over the arrivals / local slot-
                steps computed) of both paths, the speed-up and the max abs difference.
Each task runs in a fresh process per device count (``--xla_force_host_platform_device_count``
on CPU), with the client axis sharded over the devices. ``matmul`` measures the machine's
rate for exactly the matrix products of one task's local steps (forward and backward, batch
32, vmapped over the same number of clients, no other work): the ceiling the engine is
compared with. Every task process also times one large ``[L, L] x [L, L]`` product (L = 2048
on CPU, 8192 on an accelerator: :func:`large_size`) on its devices between its runs;
``fraction_of_large_matmul`` is the task's best GFLOP/s over the best large-product rate of
the same run (all its processes of that task, every device count).
Data are random images of FMNIST's shape.

Rounds: ``--repeats`` rounds, each running one fresh process per device count (best of
``--process_runs`` timed runs after compile) and, with ``--torch_python``, the matching plain
PyTorch reference loop (--torch_bench_dir; ``fedbuff``: torch_seq.py, ``many_clients``:
torch_many.py; best of its 3 timed runs after a warm-up), so both see the same machine load;
the best round of each counts and ``x PyTorch`` is their ratio of client updates/s. PyTorch is
not a dependency of afl_jax: give a Python of its own venv (e.g. ``python -m venv
../torch-venv && ../torch-venv/bin/pip install torch numpy psutil``, the CPU wheel).

The last line printed is one JSON object with at least ``updates_per_s`` and ``compile_s``
(fedbuff task, default devices).
"""

import itertools
import json
import os
import pathlib
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import afl_jax
from afl_jax import data, models
from afl_jax.core import engine, memory
from afl_jax.pipeline import devices
from afl_jax.pipeline import task as task_lib
from afl_jax.sweep import simulator as sweep_simulator

TASKS = {
  'fedbuff': dict(hidden=(200, 200), n=100, mc=20, m=10, k=10, steps=50, regime='per_job'),
  'many_clients': dict(hidden=(32,), n=10_000, mc=2_000, m=1_000, k=10, steps=10, regime='per_job'),
  'always_on': dict(hidden=(32,), n=1_000, mc=0, m=0, k=10, steps=10, regime='always_on'),
}
HETERO = {
  'dirichlet_epochs': dict(n=100, samples=6_000, alpha=0.5, epochs=2, mc=40, m=20, steps=20),
  'fedgm_random_k': dict(n=100, samples=6_000, s=10, base=2, mult=range(1, 7), steps=30),
}
HETERO_HIDDEN = (200, 200)
SWEEP = dict(n=100, mc=20, m=10, k=10, steps=20, lrs=(0.003, 0.01, 0.03, 0.1), seeds=(0, 1, 2, 3))
SWEEP_MODELS = {'logreg': (), 'mlp': (200, 200)}
BATCH = 32
# The plain PyTorch loop of each task (--torch_bench_dir, outside the repository).
REFERENCE = {'fedbuff': 'torch_seq.py', 'many_clients': 'torch_many.py'}
KNOWN_TASKS = sorted(TASKS) + ['sweep', 'hetero_k']

_TASKS = flags.DEFINE_list('tasks', ['fedbuff', 'many_clients', 'always_on'], 'Tasks to run.')
_DEVICES = flags.DEFINE_list('devices', ['1', '2', '4'], 'Host device counts to scale over.')
_REPEATS = flags.DEFINE_integer(
  'repeats',
  3,
  'Rounds of fresh processes per task and device count (the best is reported).',
  lower_bound=1,
)
_PROCESS_RUNS = flags.DEFINE_integer(
  'process_runs',
  3,
  'Timed runs inside each task process, after compile (the best counts).',
  lower_bound=1,
)
_TORCH_PYTHON = flags.DEFINE_string(
  'torch_python',
  '',
  'Python with PyTorch (a venv of its own) that runs the reference loops in the same run; '
  'empty: skip them.',
)
_TORCH_THREADS = flags.DEFINE_integer(
  'torch_threads', 0, 'PyTorch intra-op threads of the reference loops (0: their default, 2).'
)
_TORCH_MANY_STEPS = flags.DEFINE_integer(
  'torch_many_steps', 0, "Server steps of torch_many.py (0: its default, the task's 10)."
)
_TORCH_BENCH = flags.DEFINE_string(
  'torch_bench_dir',
  '',
  'Folder of the reference loops torch_seq.py / torch_many.py (not part of this '
  'repository); needed with --torch_python.',
)
_WORKER = flags.DEFINE_string('worker', '', 'Internal: run this one task here and print JSON.')
_WRITE_DOCS = flags.DEFINE_bool('write_docs', False, 'Rewrite docs/performance.md.')
# Every flag's value is checked by absl before any process is started (one ``error:`` line).
flags.register_validator(
  'tasks', lambda v: bool(v) and set(v) <= set(KNOWN_TASKS), f'choose from {KNOWN_TASKS}'
)
flags.register_validator(
  'devices',
  lambda v: bool(v) and all(d.isdigit() and int(d) >= 1 for d in v),
  'give host device counts >= 1, e.g. 1,2',
)
flags.register_validator(
  'torch_python',
  lambda p: not p or shutil.which(p) is not None,
  'no such executable (give a path or a command on PATH)',
)
flags.register_multi_flags_validator(
  ['torch_python', 'torch_bench_dir'],
  lambda f: not f['torch_python'] or bool(f['torch_bench_dir']),
  '--torch_python needs --torch_bench_dir, the folder of the reference loops',
)
flags.register_validator(
  'torch_bench_dir', lambda p: not p or os.path.isdir(p), 'no such directory'
)


def large_size(backend):
  """Side of the large product: 2048 on CPU, 8192 on an accelerator (where a 2048^3
  product takes tens of microseconds, too short to time against the launch)."""
  return 2048 if backend == 'cpu' else 8192


def layer_sizes(hidden):
  return (784, *hidden, 10)


def flops_per_update(hidden, k):
  """Matrix-product FLOPs of one client job: forward + 2 backward products per layer."""
  sizes = layer_sizes(hidden)
  macs = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
  return 3 * 2 * macs * BATCH * k


def _sharded(x):
  """``x`` with its leading axis sharded over the devices when they divide it, else as is."""
  if x.shape[0] % jax.device_count():
    return x
  return jax.device_put(x, NamedSharding(engine.default_mesh(), P(engine.CLIENT_AXIS)))


def _mlp(hidden):
  """The task's MLP and its initial params."""
  model = models.MLP(num_classes=10, hidden_sizes=hidden)
  return model, model.init(jax.random.key(0), jnp.zeros((1, 28, 28)))


def _random_problem(sizes, hidden, rng):
  """Random FMNIST-shaped data in clients of ``sizes`` rows: the problem and the MLP's params."""
  total = int(sizes.sum())
  x = rng.normal(size=(total, 28, 28)).astype(np.float32)
  y = rng.integers(0, 10, size=total).astype(np.int32)
  offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
  fed = data.FederatedData(x, y, offsets, sizes.astype(np.int32), x[:10], y[:10], x[:0], 10)
  model, params = _mlp(hidden)
  return task_lib.make_problem(data.from_federated(fed), model.apply, BATCH, jnp.float32), params


def _compile(sim, params, key):
  """``(state, inputs, compiled chunk, compile seconds)``: the whole schedule of ``sim``."""
  state = sim.init(params, key)
  inputs = sim.inputs(0)
  t0 = time.perf_counter()
  compiled = sim.runner().lower(state, inputs, sim.problem, key).compile()
  return state, inputs, compiled, time.perf_counter() - t0


def _timed_run(sim, compiled, inputs, params, key):
  """``(seconds, final state)`` of one run of ``compiled`` from a fresh state."""
  state = sim.init(params, key)
  jax.block_until_ready(state)
  t0 = time.perf_counter()
  state, _ = compiled(state, inputs, sim.problem, key)
  jax.block_until_ready(state)
  return time.perf_counter() - t0, state


def _best_time(fn, args, repeats):
  jax.block_until_ready(fn(*args))
  best = float('inf')
  for _ in range(max(repeats, 3)):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - t0)
  return best


def _large_product():
  """``(fn, args)``: one large ``[L, L] x [L, L]`` product, rows sharded over the devices."""
  side = large_size(jax.default_backend())
  big = jax.random.normal(jax.random.key(0), (side, side))
  return jax.jit(lambda x, y: x @ y), (_sharded(big), big)


def _large_rate(seconds):
  return 2 * large_size(jax.default_backend()) ** 3 / seconds / 1e9


def run_task(name, repeats):
  """Run one task in this process (device count fixed by XLA_FLAGS) and return a dict."""
  spec = TASKS[name]
  n, k, steps = spec['n'], spec['k'], spec['steps']
  sizes = np.full(n, max(60_000, n * 8) // n)
  problem, params = _random_problem(sizes, spec['hidden'], np.random.default_rng(0))
  if spec['regime'] == 'per_job':
    schedule = afl_jax.schedules.fedbuff(n, spec['mc'], spec['m'], steps, local_steps=k, seed=0)
    alg = afl_jax.algorithms.get('fedbuff', client_lr=0.01, server_lr=1.0)
    updates = steps * spec['m']
  else:
    durations = afl_jax.schedules.durations.make('uniform', low=0.5, high=3.0)
    schedule = afl_jax.schedules.waiting_windows(
      n, steps, window=1.0, durations=durations, local_steps=k, seed=0
    )
    alg = afl_jax.algorithms.get('asynfl', client_lr=0.01, num_clients=n)
    updates = steps * n
  sim = afl_jax.Simulator(alg, problem, schedule, chunk_size=steps)
  key = jax.random.key(0)
  _, inputs, compiled, compile_s = _compile(sim, params, key)
  large = _large_product()
  times, large_times = [], []
  for _ in range(repeats):  # the large product between the runs: the same machine load
    times.append(_timed_run(sim, compiled, inputs, params, key)[0])
    large_times.append(_best_time(*large, 3))
  best = min(times)
  flops = flops_per_update(spec['hidden'], k) * updates
  peak = devices.peak_device_bytes()  # on CPU: the process's peak RSS
  return {
    'task': name,
    'devices': len(jax.devices()),
    'client_updates': updates,
    'updates_per_s': updates / best,
    'gflops_per_s': flops / best / 1e9,
    'run_s_best': best,
    'compile_s': compile_s,
    'large_matmul_gflops_per_s': _large_rate(min(large_times)),
    'analytic_memory_mib': sim.memory['total'] / 2**20,
    'peak_memory_mib': (peak or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**20,
    'backend': jax.default_backend(),
    'device': devices.device_kind(),
    'large_side': large_size(jax.default_backend()),
    'jax': jax.__version__,
  }


def _bare_local_sgd(spec, clients):
  """``(fn, args)``: K steps of SGD on the task's MLP for ``clients`` clients (vmapped,
  sharded like the engine), step k on rows ``32k..32k+31`` (mod 64) of the client's own 64
  rows: the products and updates of the local steps with nothing else (no random batch
  sampling, masking, messages or server step)."""
  model, params = _mlp(spec['hidden'])
  loss = task_lib.make_loss(model.apply)
  stacked = jax.tree.map(lambda p: _sharded(jnp.broadcast_to(p, (clients, *p.shape))), params)
  rows = 2 * BATCH
  x = _sharded(jax.random.normal(jax.random.key(1), (clients, rows, 28, 28)))
  y = _sharded(jax.random.randint(jax.random.key(2), (clients, rows), 0, 10))

  def one(w, x, y):
    def body(w, k):
      start = (k * BATCH) % rows
      batch = (
        jax.lax.dynamic_slice_in_dim(x, start, BATCH),
        jax.lax.dynamic_slice_in_dim(y, start, BATCH),
      )
      g = jax.grad(loss)(w, batch)
      return jax.tree.map(lambda p, q: p - 0.01 * q, w, g), None

    return jax.lax.scan(body, w, jnp.arange(spec['k']))[0]

  return jax.jit(jax.vmap(one)), (stacked, x, y)


def run_matmul(name, repeats):
  """The machine's rate for exactly the products of ``name``'s local steps (the ceiling).

  Each product shape of one local step — forward ``[32, a] x [a, b]``, weight gradient
  ``[a, 32] x [32, b]`` and input gradient ``[32, b] x [b, a]`` per layer — is timed
  alone, for as many independent clients as the task trains together (sharded over
  the devices like the engine), repeated K times. The ceiling rate is the task's
  product FLOPs over the sum of the per-shape best times. Also reported: the rate of
  one large ``[L, L] x [L, L]`` product on the same devices, and of bare local
  SGD (:func:`_bare_local_sgd`), the engine's client work without the engine.
  """
  spec = TASKS[name]
  clients = min(spec['m'] or spec['n'], 1000)
  sizes = layer_sizes(spec['hidden'])
  key = jax.random.key(0)
  total_time, total_flops = 0.0, 0.0
  for a, b in zip(sizes[:-1], sizes[1:]):
    for lhs, rhs in (((BATCH, a), (a, b)), ((a, BATCH), (BATCH, b)), ((BATCH, b), (b, a))):
      x = _sharded(jax.random.normal(key, (clients, *lhs)))
      w = _sharded(jax.random.normal(key, (clients, *rhs)) * 0.01)

      @jax.jit
      def loop(x, w):
        def body(_, acc):
          return acc + jnp.einsum('cij,cjk->cik', x + acc[:, :1, :1] * 0, w)

        return jax.lax.fori_loop(
          0, spec['k'], body, jnp.zeros((x.shape[0], x.shape[1], w.shape[2]))
        )

      total_time += _best_time(loop, (x, w), repeats)
      total_flops += 2 * lhs[0] * lhs[1] * rhs[1] * clients * spec['k']
  big_t = _best_time(*_large_product(), repeats)
  bare_t = _best_time(*_bare_local_sgd(spec, clients), repeats)
  return {
    'task': name,
    'matmul_gflops_per_s': total_flops / total_time / 1e9,
    'large_matmul_gflops_per_s': _large_rate(big_t),
    'bare_sgd_gflops_per_s': flops_per_update(spec['hidden'], spec['k']) * clients / bare_t / 1e9,
    'clients': clients,
    'devices': jax.device_count(),
  }


def run_hetero_task(name, repeats):
  """Padded vs grouped-by-K local steps on one heterogeneous-K task, same process."""
  spec = HETERO[name]
  n = spec['n']
  rng = np.random.default_rng(0)
  if name == 'dirichlet_epochs':
    sizes = 1 + rng.multinomial(spec['samples'] - n, rng.dirichlet(np.full(n, spec['alpha'])))
    local_steps = spec['epochs'] * -(-sizes // BATCH)
    schedule = afl_jax.schedules.fedbuff(
      n, spec['mc'], spec['m'], spec['steps'], local_steps=local_steps, seed=0
    )
    alg = afl_jax.algorithms.get('fedbuff', client_lr=0.01, server_lr=1.0)
  else:
    sizes = np.full(n, spec['samples'] // n)
    schedule = afl_jax.schedules.random_staleness(
      n, spec['s'], spec['steps'], window=5, local_steps=spec['base'],
      local_steps_multipliers=spec['mult'], seed=0,
    )  # fmt: skip
    alg = afl_jax.algorithms.get('autonomous_fedgm', client_lr=0.01)
  problem, params = _random_problem(sizes, HETERO_HIDDEN, rng)
  key = jax.random.key(0)
  runs = {}
  # grouped: the blocks the CPU's automatic choice takes, named explicitly so that an
  # accelerator (whose automatic choice pads) times the same grouping.
  blocks = engine.choose_step_blocks(schedule, alg.regime, schedule.max_arrivals, 1)
  for label, buckets in (('padded', 0), ('grouped', blocks)):
    sim = afl_jax.Simulator(
      alg, problem, schedule, chunk_size=schedule.num_steps, local_step_buckets=buckets
    )
    _, inputs, compiled, _ = _compile(sim, params, key)
    runs[label] = dict(sim=sim, compiled=compiled, inputs=inputs, times=[])
  for _ in range(repeats):  # alternate, so both paths see the same machine load
    for r in runs.values():
      seconds, state = _timed_run(r['sim'], r['compiled'], r['inputs'], params, key)
      r['times'].append(seconds)
      r['final'] = [np.asarray(a) for a in jax.tree.leaves(r['sim'].params(state))]
  out = {'task': name, 'devices': len(jax.devices()), 'jax': jax.__version__}
  k = schedule.local_steps[schedule.mask]
  out.update(k_min=int(k.min()), k_mean=float(k.mean()), k_max=int(k.max()))
  for label, r in runs.items():
    useful, computed = r['sim'].step_work
    out[label] = {
      'useful_fraction': useful / computed,
      'useful_steps': useful,
      'computed_steps': computed,
      'blocks': r['sim'].num_slots // r['sim'].block_size,
      'slots': r['sim'].num_slots,
      'run_s_best': min(r['times']),
      'updates_per_s': int(schedule.mask.sum()) / min(r['times']),
    }
  out['speedup'] = out['padded']['run_s_best'] / out['grouped']['run_s_best']
  out['max_abs_diff'] = max(
    float(np.max(np.abs(a - b))) for a, b in zip(runs['padded']['final'], runs['grouped']['final'])
  )
  return out


def run_sweep_task(model_name):
  """16 runs as one sweep vs one after another; times include every compile."""
  spec = SWEEP
  n = spec['n']
  problem, params = _random_problem(
    np.full(n, 60_000 // n), SWEEP_MODELS[model_name], np.random.default_rng(0)
  )
  grid = list(itertools.product(spec['lrs'], spec['seeds']))
  scheds = {
    s: afl_jax.schedules.fedbuff(
      n, spec['mc'], spec['m'], spec['steps'], local_steps=spec['k'], seed=s
    )
    for s in spec['seeds']
  }
  keys = jax.random.split(jax.random.key(0), len(spec['seeds']))
  # One after another: a Simulator per run (the learning rate is a constant of its program).
  t0 = time.perf_counter()
  seq_compile, seq_final = 0.0, []
  for lr, s in grid:
    alg = afl_jax.algorithms.get('fedbuff', client_lr=lr, server_lr=1.0)
    sim = afl_jax.Simulator(alg, problem, scheds[s], chunk_size=spec['steps'])
    state, inputs, compiled, compile_s = _compile(sim, params, keys[s])
    seq_compile += compile_s
    state, _ = compiled(state, inputs, sim.problem, keys[s])
    seq_final.append(np.asarray(jax.tree.leaves(sim.params(state))[0]))
  seq_s = time.perf_counter() - t0
  # One sweep: the same 16 runs, one compile.
  t0 = time.perf_counter()
  sim = sweep_simulator(
    'fedbuff',
    problem,
    [scheds[s] for _, s in grid],
    len(grid),
    chunk_size=spec['steps'],
    client_lr=[lr for lr, _ in grid],
    server_lr=1.0,
  )
  rkeys = jax.random.wrap_key_data(np.stack([jax.random.key_data(keys[s]) for _, s in grid]))
  stacked = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (len(grid),) + x.shape), params)
  state = sim.init(stacked, rkeys)
  args = (state, sim.inputs(0), sim.problem, sim._keys(rkeys), sim._traced())
  c0 = time.perf_counter()
  compiled = sim.runner().lower(*args).compile()
  sweep_compile = time.perf_counter() - c0
  state, _ = compiled(*args)
  sweep_final = jax.tree.leaves(sim.params(state))[0]
  sweep_s = time.perf_counter() - t0
  diff = max(float(np.max(np.abs(a - b))) for a, b in zip(seq_final, sweep_final))
  return {
    'task': f'sweep_{model_name}',
    'devices': len(jax.devices()),
    'mode': sim.mode,
    'runs': len(grid),
    'sequential_s': seq_s,
    'sequential_compile_s': seq_compile,
    'sweep_s': sweep_s,
    'sweep_compile_s': sweep_compile,
    'speedup': seq_s / sweep_s,
    'speedup_without_compile': (seq_s - seq_compile) / max(sweep_s - sweep_compile, 1e-9),
    'max_abs_diff_vs_sequential': diff,
    'jax': jax.__version__,
  }


def run_sweep_memory(limit_gib=24.0):
  """Largest R of the default task whose analytic memory fits in ``limit_gib`` (no allocation)."""
  problem, params = _random_problem(np.full(100, 600), (200, 200), np.random.default_rng(0))
  sched = afl_jax.schedules.fedbuff(100, 20, 10, 200, local_steps=10, seed=0)
  reports = []
  for r in (1, 2):
    sim = sweep_simulator('fedbuff', problem, sched, r, client_lr=[0.05] * r, server_lr=1.0)
    stacked = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (r,) + x.shape), params)
    reports.append(sim.estimate(stacked, jax.random.split(jax.random.key(0), r)))
  fit = memory.replicas_that_fit(reports[0], reports[1], int(limit_gib * 2**30))
  return {
    'task': 'sweep_memory',
    'devices': len(jax.devices()),
    'limit_gib': limit_gib,
    'per_replica_mib': (reports[1]['total'] - reports[0]['total']) / 2**20,
    'one_replica_mib': reports[0]['total'] / 2**20,
    'max_replicas': fit,
  }


def _spawn(args, count):
  """Run ``args`` as a worker process on ``count`` host devices; its last JSON line."""
  env = dict(os.environ)
  flags_ = [
    f for f in env.get('XLA_FLAGS', '').split() if 'xla_force_host_platform_device_count' not in f
  ]
  env['XLA_FLAGS'] = ' '.join(flags_ + [f'--xla_force_host_platform_device_count={count}'])
  proc = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True)
  if proc.returncode != 0:
    raise RuntimeError(f'worker {args} failed:\n{proc.stderr[-3000:]}')
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _reference(task):
  """Run the plain PyTorch loop of ``task`` once (its own warm-up + 3 timed runs); its JSON.

  A failure is reported and returns None, so a run's JAX results are kept.
  """
  script = os.path.join(os.path.abspath(_TORCH_BENCH.value), REFERENCE[task])
  env = dict(os.environ)
  env.pop('XLA_FLAGS', None)
  env.setdefault('BENCH_RESULTS', os.path.join(tempfile.gettempdir(), 'afl_jax_bench_results'))
  args = [_TORCH_PYTHON.value, script]
  if _TORCH_THREADS.value:
    args += ['--threads', str(_TORCH_THREADS.value)]
  if task == 'many_clients' and _TORCH_MANY_STEPS.value:
    args += ['--steps', str(_TORCH_MANY_STEPS.value)]
  proc = subprocess.run(args, env=env, cwd=os.path.dirname(script), capture_output=True, text=True)
  if proc.returncode != 0:
    print(f'PyTorch reference {script} failed:\n{proc.stderr[-2000:]}')
    return None
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _best_reference(task, outputs):
  """The best timed run over the reference processes of a run: updates/s and torch version."""
  spec = TASKS[task]
  steps = _TORCH_MANY_STEPS.value if task == 'many_clients' and _TORCH_MANY_STEPS.value else 0
  updates = (steps or spec['steps']) * spec['m']  # the task's length unless shortened
  done = [o for o in outputs if o]
  times = [t for o in done for t in o.get('run_s', o.get('times_s', []))]
  if not times:
    return None
  if done[0].get('updates', updates) != updates:
    raise RuntimeError(f'{REFERENCE[task]} ran {done[0]["updates"]} updates; expected {updates}.')
  return {
    'updates_per_s': updates / min(times),
    'run_s_best': min(times),
    'processes': len(done),
    'torch': done[0].get('torch'),
    'script': REFERENCE[task],
    'updates': updates,
    'threads': _TORCH_THREADS.value or 2,
  }


def run_worker(worker):
  """The JSON result of one ``--worker`` (``task``, ``task:matmul``, ``sweep:...``, ...)."""
  task, _, kind = worker.partition(':')
  if task == 'sweep':
    return run_sweep_memory() if kind == 'memory' else run_sweep_task(kind)
  if task == 'hetero_k':
    return run_hetero_task(kind, _REPEATS.value)
  return run_matmul(task, _REPEATS.value) if kind == 'matmul' else run_task(task, _REPEATS.value)


def main(argv):
  del argv
  if _WORKER.value:
    print(json.dumps(run_worker(_WORKER.value)))
    return
  sys.stdout.reconfigure(line_buffering=True)  # each line shows as soon as it is printed
  results, ceilings = [], {}
  if 'hetero_k' in _TASKS.value:
    hetero = [_spawn([f'--worker=hetero_k:{t}', f'--repeats={_REPEATS.value}'], 1) for t in HETERO]
    for r in hetero:
      p, g = r['padded'], r['grouped']
      print(
        f'{r["task"]:17s} K {r["k_min"]}..{r["k_max"]} (mean {r["k_mean"]:.1f}): useful steps '
        f'{100 * p["useful_fraction"]:.0f}% padded -> {100 * g["useful_fraction"]:.0f}% grouped '
        f'({g["blocks"]} blocks of {g["slots"] // g["blocks"]}); {p["run_s_best"]:.2f}s -> '
        f'{g["run_s_best"]:.2f}s: speed-up {r["speedup"]:.2f}x; '
        f'max abs diff {r["max_abs_diff"]:.1e}',
      )
    print(json.dumps({'hetero_k': hetero}))
  if 'sweep' in _TASKS.value:
    count = int(_DEVICES.value[-1]) if len(_DEVICES.value) == 1 else 2
    sweeps = [_spawn([f'--worker=sweep:{m}'], count) for m in [*SWEEP_MODELS, 'memory']]
    for r in sweeps[:-1]:
      print(
        f'{r["task"]:13s} devices={r["devices"]} ({r["mode"]}): {r["runs"]} runs one after '
        f'another {r["sequential_s"]:.1f}s (compiles {r["sequential_compile_s"]:.1f}s) vs one '
        f'sweep {r["sweep_s"]:.1f}s (compile {r["sweep_compile_s"]:.1f}s): speed-up '
        f'{r["speedup"]:.1f}x ({r["speedup_without_compile"]:.1f}x without compiles)',
      )
    m = sweeps[-1]
    print(
      f'sweep memory: default task {m["one_replica_mib"]:.0f} MiB for 1 replica, '
      f'+{m["per_replica_mib"]:.0f} MiB per replica: {m["max_replicas"]} replicas fit in '
      f'{m["limit_gib"]:.0f} GiB',
    )
    print(json.dumps({'sweeps': sweeps}))
  if all(t in ('sweep', 'hetero_k') for t in _TASKS.value):
    return
  loads = [os.getloadavg()[0]]
  for task in [t for t in _TASKS.value if t not in ('sweep', 'hetero_k')]:
    # The ceiling: the best rate of the bare products over the device counts tried.
    found = [
      _spawn([f'--worker={task}:matmul', f'--repeats={_PROCESS_RUNS.value}'], int(d))
      for d in _DEVICES.value
    ]
    ceilings[task] = dict(max(found, key=lambda c: c['matmul_gflops_per_s']))
    runs = {d: [] for d in _DEVICES.value}
    torch_runs = []
    for _ in range(_REPEATS.value):  # rounds: every implementation once, interleaved
      for d in _DEVICES.value:
        loads.append(os.getloadavg()[0])
        runs[d].append(_spawn([f'--worker={task}', f'--repeats={_PROCESS_RUNS.value}'], int(d)))
      if _TORCH_PYTHON.value and task in REFERENCE:
        loads.append(os.getloadavg()[0])
        torch_runs.append(_reference(task))
    loads.append(os.getloadavg()[0])
    large = max(r['large_matmul_gflops_per_s'] for r in found + sum(runs.values(), []))
    ceilings[task]['large_matmul_gflops_per_s'] = large
    bare = max(c['bare_sgd_gflops_per_s'] for c in found)
    ceilings[task]['bare_sgd_gflops_per_s'] = bare
    print(
      f'{task:13s} bare local SGD {bare:.1f} GFLOP/s ({100 * bare / large:.0f}% of the large '
      f'product, {large:.1f}): the local steps without the engine',
    )
    torch = _best_reference(task, torch_runs)
    if torch is not None:
      ceilings[task]['torch'] = torch
    for d in _DEVICES.value:
      r = dict(max(runs[d], key=lambda r: r['updates_per_s']))
      r['rounds_updates_per_s'] = [x['updates_per_s'] for x in runs[d]]
      r['fraction_of_matmul_ceiling'] = r['gflops_per_s'] / ceilings[task]['matmul_gflops_per_s']
      r['fraction_of_large_matmul'] = r['gflops_per_s'] / large
      r['x_pytorch'] = r['updates_per_s'] / torch['updates_per_s'] if torch else None
      results.append(r)
      vs_torch = (
        f', {r["x_pytorch"]:.2f}x PyTorch ({torch["updates_per_s"]:.1f} updates/s)' if torch else ''
      )
      print(
        f'{task:13s} devices={r["devices"]} ({r["device"]}): {r["updates_per_s"]:9.1f} updates/s '
        f'{r["gflops_per_s"]:6.1f} GFLOP/s ({100 * r["fraction_of_matmul_ceiling"]:.0f}% '
        f'of {ceilings[task]["matmul_gflops_per_s"]:.1f}; fraction_of_large_matmul '
        f'{100 * r["fraction_of_large_matmul"]:.0f}% of {large:.1f}){vs_torch}, '
        f'compile {r["compile_s"]:.1f}s, peak {r["peak_memory_mib"]:.0f} MiB',
      )
    if task in REFERENCE and torch is None:
      print(f'{task:13s} PyTorch reference skipped (give --torch_python)')
  load_range = (min(loads), max(loads))
  print(
    f'load average (1 min) sampled before each process: {load_range[0]:.1f}-{load_range[1]:.1f}'
  )
  if _WRITE_DOCS.value:
    write_docs(results, ceilings, load_range)
  main_task = 'fedbuff' if 'fedbuff' in ceilings else results[0]['task']
  best = max((r for r in results if r['task'] == main_task), key=lambda r: r['updates_per_s'])
  summary = {k: best[k] for k in ('updates_per_s', 'compile_s', 'devices', 'task')}
  print(
    json.dumps(
      summary | dict(results=results, matmul_ceilings=ceilings, load_average_1min=load_range)
    )
  )


def write_docs(results, ceilings, load_range):
  """Rewrite the measured part of docs/performance.md (its first paragraph and table).

  The rest of the page (how to read the table, the GPU figures, the analysis and the
  sweep / hetero_k sections) is kept as it is.
  """
  path = pathlib.Path(__file__).parent.parent / 'docs' / 'performance.md'
  command = ' '.join(['python scripts/benchmark.py', *sys.argv[1:]])
  refs = [c['torch'] for c in ceilings.values() if c.get('torch')]
  torch_versions = sorted(
    {f'{t["torch"]} (CPU, torch.set_num_threads({t["threads"]}))' for t in refs}
  )
  lines = [
    '# Performance',
    '',
    f'Measured by `{command}` on {platform.machine()}, {os.cpu_count()} CPU cores, '
    f'JAX {jax.__version__} ({jax.default_backend()})'
    + (f', PyTorch {", ".join(torch_versions)}' if torch_versions else '')
    + f', {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}. Best of {_REPEATS.value} '
    f'rounds (each a fresh process per device count, best of {_PROCESS_RUNS.value} timed runs, '
    'and the PyTorch loop, interleaved); compile time apart. Load average (1 min) sampled '
    f'before each process: {load_range[0]:.1f}-{load_range[1]:.1f} on {os.cpu_count()} cores.',
    '',
    '| task | devices | client updates/s | GFLOP/s | same-shape products GFLOP/s '
    '| fraction | large product GFLOP/s | fraction_of_large_matmul | bare local SGD fraction '
    '| PyTorch updates/s | x PyTorch | compile s | analytic state MiB | peak RSS MiB |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  for r in results:
    c = ceilings[r['task']]
    torch = c.get('torch')
    lines.append(
      f'| {r["task"]} | {r["devices"]} | {r["updates_per_s"]:.1f} | '
      f'{r["gflops_per_s"]:.1f} | {c["matmul_gflops_per_s"]:.1f} | '
      f'{100 * r["fraction_of_matmul_ceiling"]:.0f}% | '
      f'{c["large_matmul_gflops_per_s"]:.1f} | '
      f'{100 * r["fraction_of_large_matmul"]:.0f}% | '
      f'{100 * c["bare_sgd_gflops_per_s"] / c["large_matmul_gflops_per_s"]:.0f}% | '
      + (f'{torch["updates_per_s"]:.1f} | {r["x_pytorch"]:.2f}x | ' if torch else '- | - | ')
      + f'{r["compile_s"]:.1f} | {r["analytic_memory_mib"]:.0f} | {r["peak_memory_mib"]:.0f} |'
    )
  # The page's title, measured paragraph and table are its first three blocks; the rest stays.
  old = path.read_text().split('\n\n', 3) if path.exists() else []
  path.write_text('\n'.join(lines) + '\n' + (f'\n{old[3]}' if len(old) == 4 else ''))


if __name__ == '__main__':
  from afl_jax.pipeline import cli

  app.run(main, flags_parser=cli.flags_parser())
