"""Engine throughput, compile time, matrix-product ceiling, device scaling, peak memory.

  python scripts/benchmark.py                       # all tasks, 1/2/4 host devices
  python scripts/benchmark.py --tasks=fedbuff --devices=1 --repeats=3
  python scripts/benchmark.py --write_docs          # also rewrite docs/performance.md
  python scripts/benchmark.py --tasks=cnn,resnet18 --devices=2 \
      --torch_python=../torch-venv/bin/python  # + the PyTorch loops (scripts/torch_reference.py)

Tasks (client updates = local jobs of K steps):
  fedbuff       FedBuff, MLP 784-200-200-10, batch 32, K=10, N=100, Mc=20, M=10, 50 steps
  many_clients  FedBuff, MLP 784-32-10, batch 32, K=10, N=10,000, Mc=2,000, M=1,000, 10 steps
  always_on     AsynFL (every client trains every step), MLP 784-32-10, batch 32, K=10,
                N=1,000, waiting windows, 10 steps
  cnn           FedBuff, the CNN of afl_jax/models/cnn.py (3x3 convs 32-64-64, two 2x2
                max-pools, FC 128, FC 10) on 28x28x1 images, batch 32, K=5, N=100, Mc=20,
                M=10, 6 steps (60 client jobs)
  resnet18      FedBuff, ResNet-18 with GroupNorm (afl_jax/models/resnet.py) on 32x32x3
                images, batch 32, K=2, N=20 clients of 100 rows, Mc=4, M=2, 3 steps (6 jobs)
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
  conv_step     how a convolving client's step is best run on this CPU: one local SGD step
                (forward and backward, batch 32) of the cnn and the resnet18 task's model,
                1 device, process CPU time per client step and as a fraction of the 2048^3
                product timed the same way, best of ``--repeats``, per route: lax, vmapped
                (10 clients; lax.conv becomes a grouped convolution, reduce_window's gradient
                select_and_scatter; cnn only), direct, vmapped (fast_apply; each convolution
                loops over the clients), direct, one at a time (lax.map over the clients),
                direct and Winograd, one at a time (the 3x3 stride-1 layers of
                models.winograd.TILES by Winograd: the engine's route on CPU; resnet18
                only, the cnn has no such layer; models.fast.one_at_a_time), the same with
                the 32x32x64 layers by direct; with --torch_python also
                PyTorch's step of the same model, 1 thread, CPU time, against the same product
  conv_tiles    how each 3x3 stride-1 layer of resnet18 is best convolved on this CPU (the choice
                of models.winograd.TILES): per layer shape (32x32x64, 16x16x128, 8x8x256,
                4x4x512, batch 32), process CPU time of its forward and both gradients by
                models.fast.direct and by Winograd's F(2x2, 3x3) and F(4x4, 3x3)
                (models.fast.tiled), best of ``--repeats``, interleaved
  conv_profile  where one client step of resnet18 and cnn goes, as the engine trains it: ms per
                kind of XLA op (jax.profiler trace; the three convolutions of models.fast.direct
                by name: conv_forward, conv_input_grad, conv_kernel_grad; wall time)
Each task runs in a fresh process per device count (``jax_num_cpu_devices``
on CPU), with the client axis sharded over the devices. ``matmul`` measures the machine's
rate for exactly the matrix products of one task's local steps (forward and backward, batch
32, vmapped over the same number of clients, no other work): the ceiling the engine is
compared with. Every task process also times one large ``[L, L] x [L, L]`` product (L = 2048
on CPU, 8192 on an accelerator: :func:`large_size`) on its devices between its runs;
``fraction_of_large_matmul`` is the task's best GFLOP/s over the best large-product rate of
the same run (all its processes of that task, every device count). A task's FLOPs are
3 x the matrix products and convolutions of its model's forward pass (:func:`flops_per_update`).
The ``matmul`` ceiling and bare local SGD are measured for the MLP tasks only.
Data are random images of FMNIST's shape (CIFAR-10's for resnet18). The engine trains the
model through :func:`afl_jax.models.fast_apply`, as the pipeline does.

Rounds: ``--repeats`` rounds, each running one fresh process per device count (best of
``--process_runs`` timed runs after compile) and, with ``--torch_python``, the plain PyTorch
loop of the same work (scripts/torch_reference.py, given the task's model, N, Mc, M, K, batch
and steps; best of ``--process_runs`` timed runs after a warm-up job), so both see the same
machine load; the best round of each counts and ``x PyTorch`` is their ratio of client
updates/s. Every FedBuff task has that reference (always_on has none). PyTorch is not a
dependency of afl_jax: give a Python of its own venv (e.g. ``python -m venv ../torch-venv &&
../torch-venv/bin/pip install torch numpy psutil``, the CPU wheel).

Every line of figures names this machine's CPU model, core count and vector extensions
(:func:`cpu_description`). The PyTorch loop's fraction of the large product is its updates/s
times the task's FLOPs per update over the large product's rate of the same run.

The last line printed is one JSON object with at least ``updates_per_s`` and ``compile_s``
(fedbuff task, default devices).
"""

import itertools
import json
import math
import multiprocessing
import os
import pathlib
import platform
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from absl import flags
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import afl_jax
from afl_jax import data, models
from afl_jax.api import simulator as sweep_simulator
from afl_jax.core import engine, memory
from afl_jax.core.simulator import stack_trees
from afl_jax.pipeline import cli, devices
from afl_jax.pipeline import task as task_lib
from afl_jax.pipeline import workdir as workdir_lib

MLP = dict(model='mlp', regime='per_job')
TASKS = {
  'fedbuff': MLP | dict(hidden=(200, 200), n=100, mc=20, m=10, k=10, steps=50),
  'many_clients': MLP | dict(hidden=(32,), n=10_000, mc=2_000, m=1_000, k=10, steps=10),
  'always_on': MLP | dict(hidden=(32,), n=1_000, mc=0, m=0, k=10, steps=10, regime='always_on'),
  'cnn': dict(model='cnn', n=100, mc=20, m=10, k=5, steps=6, regime='per_job'),
  'resnet18': dict(
    model='resnet18', image=(32, 32, 3), n=20, rows=100, mc=4, m=2, k=2, steps=3, regime='per_job'
  ),
}
HETERO = {
  'dirichlet_epochs': dict(n=100, samples=6_000, alpha=0.5, epochs=2, mc=40, m=20, steps=20),
  'fedgm_random_k': dict(n=100, samples=6_000, s=10, base=2, mult=range(1, 7), steps=30),
}
MLP_200 = MLP | dict(hidden=(200, 200))
SWEEP = dict(n=100, mc=20, m=10, k=10, steps=20, lrs=(0.003, 0.01, 0.03, 0.1), seeds=(0, 1, 2, 3))
SWEEP_MODELS = {'logreg': MLP | dict(hidden=()), 'mlp': MLP_200}
BATCH = 32
# The plain PyTorch loop, run for every FedBuff task.
REFERENCE = pathlib.Path(__file__).with_name('torch_reference.py')
KNOWN_TASKS = sorted(TASKS) + ['sweep', 'hetero_k', 'conv_step', 'conv_tiles', 'conv_profile']

_TASKS = flags.DEFINE_list(
  'tasks', ['fedbuff', 'many_clients', 'always_on', 'cnn', 'resnet18'], 'Tasks to run.'
)
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
  'torch_threads', 2, 'PyTorch intra-op threads of the reference loops.', lower_bound=1
)
_TORCH_STEPS = flags.DEFINE_integer(
  'torch_steps',
  0,
  "Server steps of each reference loop (0: the task's); a rate over identical jobs either way.",
  lower_bound=0,
)
_CONV = flags.DEFINE_enum(
  'conv',
  'fast',
  ['fast', 'direct', 'lax'],
  'fast: models trained through afl_jax.models.fast_apply as the pipeline trains them; '
  'direct: the same without its Winograd layers (models.winograd.TILES empty: every '
  "convolution by models.fast.direct, the engine before issue 47's Winograd route); lax: "
  'fast_apply switched off (lax.conv and reduce_window, the engine before issue 39).',
)
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


def cpu_description():
  """This machine's CPU model and vector extensions (from /proc/cpuinfo on Linux, else what
  ``platform`` reports) and core count: printed beside every figure, since a ratio to PyTorch
  depends on them (issue 47: PyTorch's convolutions are ten times faster on AVX-512)."""
  try:
    first = pathlib.Path('/proc/cpuinfo').read_text().split('\n\n')[0]
  except OSError:
    first = ''
  info = dict(
    (k.strip(), v.strip()) for k, _, v in (line.partition(':') for line in first.splitlines())
  )
  name = info.get('model name') or platform.processor() or platform.machine()
  if 'cpu family' in info:
    name += f' (family {info["cpu family"]} model {info.get("model", "?")})'
  flags = (info.get('flags') or info.get('Features') or '').split()
  wide = [f[6:].lstrip('_') for f in flags if f.startswith('avx512')]
  vector = [f.upper() for f in ('avx2', 'fma', 'asimd', 'sve', 'sve2') if f in flags]
  vector += ['AVX-512 ' + '/'.join(wide)] if wide else []
  vector += [f.upper() for f in flags if f.startswith('amx')]
  return f'{name}, {os.cpu_count()} cores, {", ".join(vector) or "no vector extensions listed"}'


CPU = cpu_description()


def large_size(backend):
  """Side of the large product: 2048 on CPU, 8192 on an accelerator (where a 2048^3
  product takes tens of microseconds, too short to time against the launch)."""
  return 2048 if backend == 'cpu' else 8192


def layer_sizes(hidden):
  return (784, *hidden, 10)


def _product_flops(eqn):
  """FLOPs of one matrix product or (ungrouped) convolution of a jaxpr; 0 for anything else."""
  out = math.prod(eqn.outvars[0].aval.shape)
  if eqn.primitive.name == 'dot_general':
    (contracted, _), _ = eqn.params['dimension_numbers']
    return 2 * out * math.prod(eqn.invars[0].aval.shape[d] for d in contracted)
  if eqn.primitive.name == 'conv_general_dilated':  # per output: kernel window x input channels
    kernel = eqn.invars[1].aval.shape
    return 2 * out * math.prod(kernel) // kernel[eqn.params['dimension_numbers'].rhs_spec[0]]
  return 0


def flops_per_update(spec):
  """Product FLOPs of one client job: K steps of 3 x the forward's matrix products and
  convolutions at batch 32 (forward + 2 backward products per layer)."""
  model, params, image = _model(spec)
  jaxpr = jax.make_jaxpr(model.apply)(params, jnp.zeros((BATCH, *image))).jaxpr
  return 3 * sum(map(_product_flops, jaxpr.eqns)) * spec['k']


def _sharded(x):
  """``x`` with its leading axis sharded over the devices when they divide it, else as is."""
  if x.shape[0] % jax.device_count():
    return x
  return jax.device_put(x, NamedSharding(engine.default_mesh(), P(engine.CLIENT_AXIS)))


def _model(spec):
  """``(model, initial params, image shape)`` of a task: ``spec['model']`` (an MLP of widths
  ``spec['hidden']``, or a registered model) on images of ``spec['image']`` (FMNIST's)."""
  image = spec.get('image', (28, 28))
  if spec['model'] == 'mlp':
    model = models.MLP(num_classes=10, hidden_sizes=spec['hidden'])
  else:
    model = models.make(spec['model'], num_classes=10, image_shape=image)
  return model, model.init(jax.random.key(0), jnp.zeros((1, *image))), image


def _rows(spec):
  """Rows per client: ``spec['rows']``, else 60,000 over the clients (at least 8)."""
  return spec.get('rows', max(60_000, spec['n'] * 8) // spec['n'])


def _random_problem(sizes, spec, rng=None):
  """Random images in clients of ``sizes`` rows: the problem (the model trained through
  ``models.fast_apply``, as the pipeline trains it) and the model's initial params."""
  rng = np.random.default_rng(0) if rng is None else rng
  model, params, image = _model(spec)
  total = int(sizes.sum())
  x = rng.normal(size=(total, *image)).astype(np.float32)
  y = rng.integers(0, 10, size=total).astype(np.int32)
  offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
  lay = data.grouped(x, y, offsets, sizes.astype(np.int32), x[:10], y[:10], x[:0], 10)
  apply_fn = models.fast_apply(model.apply)
  return task_lib.make_problem(lay, apply_fn, BATCH, jnp.float32), params


# ---- timing: every measurement waits for its result ----------------------------------------
def _clock(fn, *args):
  """``(seconds, result)`` of ``fn(*args)``, the result ready."""
  t0 = time.perf_counter()
  out = jax.block_until_ready(fn(*args))
  return time.perf_counter() - t0, out


def _best_time(fn, args, repeats):
  """The best of ``max(repeats, 3)`` timed calls of ``fn(*args)`` after a warm-up call."""
  _clock(fn, *args)
  return min(_clock(fn, *args)[0] for _ in range(max(repeats, 3)))


def _compile(sim, params, key):
  """``(compile seconds, compiled chunk, state, inputs)``: the whole schedule of ``sim``;
  ``inputs``: the chunk's arguments after the state."""
  state, *inputs = sim.args(sim.init(params, key), key)
  seconds, compiled = _clock(lambda: sim.runner().lower(state, *inputs).compile())
  return seconds, compiled, state, inputs


def _timed_run(sim, compiled, inputs, params, key):
  """``(seconds, final state)`` of one run of ``compiled`` from a fresh state."""
  state = jax.block_until_ready(sim.init(params, key))
  seconds, (state, _) = _clock(compiled, state, *inputs)
  return seconds, state


_matmul = jax.jit(jnp.matmul)


def _large_rate(repeats):
  """GFLOP/s of one large ``[L, L] x [L, L]`` product, rows sharded over the devices."""
  side = large_size(jax.default_backend())
  big = jax.random.normal(jax.random.key(0), (side, side))
  return 2 * side**3 / _best_time(_matmul, (_sharded(big), big), repeats) / 1e9


# ---- the workers: one task in this process, its result as a dict ---------------------------
def run_task(name, repeats):
  """Run one task in this process (on the devices it was started with) and return a dict."""
  spec = TASKS[name]
  n, k, steps = spec['n'], spec['k'], spec['steps']
  problem, params = _random_problem(np.full(n, _rows(spec)), spec)
  if spec['regime'] == 'per_job':
    schedule = afl_jax.schedules.fedbuff(n, spec['mc'], spec['m'], steps, local_steps=k, seed=0)
    alg = afl_jax.algorithms.make('fedbuff', client_lr=0.01, server_lr=1.0)
    updates = steps * spec['m']
  else:
    durations = afl_jax.schedules.durations.make('uniform', low=0.5, high=3.0)
    schedule = afl_jax.schedules.waiting_windows(
      n, steps, window=1.0, durations=durations, local_steps=k, seed=0
    )
    alg = afl_jax.algorithms.make('asynfl', client_lr=0.01, num_clients=n)
    updates = steps * n
  sim = afl_jax.Simulator(alg, problem, schedule, chunk_size=steps)
  key = jax.random.key(0)
  compile_s, compiled, _, inputs = _compile(sim, params, key)
  times, large = [], []
  for _ in range(repeats):  # the large product between the runs: the same machine load
    times.append(_timed_run(sim, compiled, inputs, params, key)[0])
    large.append(_large_rate(3))
  best = min(times)
  peak = devices.peak_device_bytes()  # on CPU: the process's peak RSS
  return {
    'task': name,
    'devices': len(jax.devices()),
    'client_updates': updates,
    'updates_per_s': updates / best,
    'gflops_per_s': flops_per_update(spec) * updates / best / 1e9,
    'run_s_best': best,
    'compile_s': compile_s,
    'large_matmul_gflops_per_s': max(large),
    'analytic_memory_mib': sim.memory['total'] / 2**20,
    'peak_memory_mib': (peak or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**20,
    'backend': jax.default_backend(),
    'device': devices.device_kind(),
    'cpu': CPU,
    'large_side': large_size(jax.default_backend()),
    'jax': jax.__version__,
  }


def _bare_local_sgd(spec, clients):
  """``(fn, args)``: K steps of SGD on the task's MLP for ``clients`` clients (vmapped,
  sharded like the engine), step k on rows ``32k..32k+31`` (mod 64) of the client's own 64
  rows: the products and updates of the local steps with nothing else (no random batch
  sampling, masking, messages or server step)."""
  model, params, _ = _model(spec)
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

  @jax.jit
  def loop(x, w):
    def body(_, acc):
      return acc + jnp.einsum('cij,cjk->cik', x + acc[:, :1, :1] * 0, w)

    return jax.lax.fori_loop(0, spec['k'], body, jnp.zeros((x.shape[0], x.shape[1], w.shape[2])))

  total_time, total_flops = 0.0, 0.0
  for a, b in zip(sizes[:-1], sizes[1:]):
    for lhs, rhs in (((BATCH, a), (a, b)), ((a, BATCH), (BATCH, b)), ((BATCH, b), (b, a))):
      x = _sharded(jax.random.normal(key, (clients, *lhs)))
      w = _sharded(jax.random.normal(key, (clients, *rhs)) * 0.01)
      total_time += _best_time(loop, (x, w), repeats)
      total_flops += 2 * lhs[0] * lhs[1] * rhs[1] * clients * spec['k']
  bare_t = _best_time(*_bare_local_sgd(spec, clients), repeats)
  return {
    'task': name,
    'matmul_gflops_per_s': total_flops / total_time / 1e9,
    'large_matmul_gflops_per_s': _large_rate(repeats),
    'bare_sgd_gflops_per_s': flops_per_update(spec) * clients / bare_t / 1e9,
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
    alg = afl_jax.algorithms.make('fedbuff', client_lr=0.01, server_lr=1.0)
  else:
    sizes = np.full(n, spec['samples'] // n)
    schedule = afl_jax.schedules.random_staleness(
      n, spec['s'], spec['steps'], window=5, local_steps=spec['base'],
      local_steps_multipliers=spec['mult'], seed=0,
    )  # fmt: skip
    alg = afl_jax.algorithms.make('autonomous_fedgm', client_lr=0.01)
  problem, params = _random_problem(sizes, MLP_200, rng)
  key = jax.random.key(0)
  runs = {}
  # grouped: the blocks the CPU's automatic choice takes, named explicitly so that an
  # accelerator (whose automatic choice pads) times the same grouping.
  blocks = engine.choose_step_blocks(schedule, alg.regime, schedule.max_arrivals, 1)
  for label, buckets in (('padded', 0), ('grouped', blocks)):
    sim = afl_jax.Simulator(
      alg, problem, schedule, chunk_size=schedule.num_steps, local_step_buckets=buckets
    )
    _, compiled, _, inputs = _compile(sim, params, key)
    runs[label] = dict(sim=sim, compiled=compiled, inputs=inputs, times=[])
  for _ in range(repeats):  # alternate, so both paths see the same machine load
    for r in runs.values():
      seconds, state = _timed_run(r['sim'], r['compiled'], r['inputs'], params, key)
      r['times'].append(seconds)
      r['final'] = [np.asarray(a) for a in jax.tree.leaves(r['sim'].params(state))]
  k = schedule.local_steps[schedule.mask]
  out = {'task': name, 'devices': len(jax.devices()), 'jax': jax.__version__}
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
  spec, n = SWEEP, SWEEP['n']
  problem, params = _random_problem(np.full(n, 60_000 // n), SWEEP_MODELS[model_name])
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
    alg = afl_jax.algorithms.make('fedbuff', client_lr=lr, server_lr=1.0)
    sim = afl_jax.Simulator(alg, problem, scheds[s], chunk_size=spec['steps'])
    compile_s, compiled, state, inputs = _compile(sim, params, keys[s])
    seq_compile += compile_s
    state, _ = compiled(state, *inputs)
    seq_final.append(np.asarray(jax.tree.leaves(sim.params(state))[0]))
  seq_s = time.perf_counter() - t0
  # One sweep: the same 16 runs, one compile.
  t0 = time.perf_counter()
  lrs, seeds = zip(*grid)
  sim = sweep_simulator(
    'fedbuff',
    problem,
    [scheds[s] for s in seeds],
    len(grid),
    chunk_size=spec['steps'],
    client_lr=list(lrs),
    server_lr=1.0,
  )
  rkeys = keys[np.array(seeds)]
  state = sim.init(stack_trees([params] * len(grid)), rkeys)
  args = sim.args(state, rkeys)
  sweep_compile, compiled = _clock(lambda: sim.runner().lower(*args).compile())
  state, _ = compiled(*args)
  sweep_final = jax.tree.leaves(sim.params(state))[0]
  sweep_s = time.perf_counter() - t0
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
    'max_abs_diff_vs_sequential': max(
      float(np.max(np.abs(a - b))) for a, b in zip(seq_final, sweep_final)
    ),
    'jax': jax.__version__,
  }


def run_sweep_memory(limit_gib=24.0):
  """Largest R of the default task whose analytic memory fits in ``limit_gib`` (no allocation)."""
  problem, params = _random_problem(np.full(100, 600), MLP_200)
  sched = afl_jax.schedules.fedbuff(100, 20, 10, 200, local_steps=10, seed=0)
  reports = []
  for r in (1, 2):
    sim = sweep_simulator('fedbuff', problem, sched, r, client_lr=[0.05] * r, server_lr=1.0)
    keys = jax.random.split(jax.random.key(0), r)
    reports.append(sim.estimate(stack_trees([params] * r), keys))
  return {
    'task': 'sweep_memory',
    'devices': len(jax.devices()),
    'limit_gib': limit_gib,
    'per_replica_mib': (reports[1]['total'] - reports[0]['total']) / 2**20,
    'one_replica_mib': reports[0]['total'] / 2**20,
    'max_replicas': memory.replicas_that_fit(reports[0], reports[1], int(limit_gib * 2**30)),
  }


CONV_ROUTES = {  # route: (rules of fast_apply, clients vmapped, layers of TILES by direct)
  'lax, vmapped': (False, True, 'all'),
  'direct, vmapped': (True, True, 'all'),
  'direct, one at a time': (True, False, 'all'),
  'direct and Winograd, one at a time': (True, False, ()),  # the engine's route on CPU
  'the same, 32x32x64 by direct': (True, False, ((32, 64),)),
}
CONV_STEP = {  # the cnn has no layer of models.winograd.TILES: its engine route is direct's
  'cnn': (10, tuple(CONV_ROUTES)[:3]),
  'resnet18': (2, tuple(CONV_ROUTES)[1:]),
}


def _client_step(spec, clients, rules, vmapped, direct=()):
  """``(jitted fn, args)``: one local SGD step (batch 32) of ``clients`` clients of ``spec``'s
  model, each its own params and batch: vmapped, or one at a time (``lax.map``) as the engine
  trains clients that convolve on CPU; ``rules``: through fast_apply, else lax's own;
  ``direct``: the layers of models.winograd.TILES convolved by direct instead ('all', or
  some keys), the others by Winograd."""
  from afl_jax.models import fast, winograd

  model, params, image = _model(spec)
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(clients, BATCH, *image)), jnp.float32)
  y = jnp.asarray(rng.integers(0, 10, size=(clients, BATCH)), jnp.int32)
  ps = jax.tree.map(lambda p: jnp.broadcast_to(p, (clients, *p.shape)), params)
  apply = models.fast_apply(model.apply) if rules else model.apply

  def step(p, x, y):
    loss = lambda p: optax.softmax_cross_entropy_with_integer_labels(apply(p, x), y).mean()
    return jax.tree.map(lambda a, g: a - 0.01 * g, p, jax.grad(loss)(p))

  fn = jax.vmap(step) if vmapped else lambda *a: jax.lax.map(lambda a: step(*a), a)
  platforms, fast.PLATFORMS = fast.PLATFORMS, fast.PLATFORMS if rules else ()
  measured = winograd.TILES
  winograd.TILES = {k: m for k, m in measured.items() if direct != 'all' and k not in direct}
  try:
    compiled = jax.jit(fn).lower(ps, x, y).compile()
  finally:
    fast.PLATFORMS, winograd.TILES = platforms, measured
  return compiled, (ps, x, y)


def _cpu_seconds(fn, args, repeats):
  """Best process CPU time of ``fn(*args)`` over ``max(repeats, 3)`` calls after a warm-up: on
  one device, what the work costs however the shared cores are loaded."""
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(max(repeats, 3)):
    t0 = time.process_time()
    jax.block_until_ready(fn(*args))
    times.append(time.process_time() - t0)
  return min(times)


def run_conv_step(repeats):
  """Per route, CPU seconds of one local step of a client of the cnn and the resnet18 task's
  model, and as a fraction of the 2048^3 product's rate timed the same way."""
  side = large_size('cpu')
  big = jax.random.normal(jax.random.key(0), (side, side))
  large = 2 * side**3 / _cpu_seconds(_matmul, (big, big), repeats)
  out = {'task': 'conv_step', 'devices': 1, 'large_matmul_gflops_per_cpu_s': large / 1e9}
  for name, (clients, routes) in CONV_STEP.items():
    spec = TASKS[name]
    flops = flops_per_update(spec) / spec['k']
    for route in routes:
      fn, args = _client_step(spec, clients, *CONV_ROUTES[route])
      seconds = _cpu_seconds(fn, args, repeats) / clients
      out[f'{name}: {route}'] = {'cpu_s': seconds, 'fraction': flops / seconds / large}
  return out


TILE_LAYERS = ((32, 64), (16, 128), (8, 256), (4, 512))  # resnet18's 3x3 stride-1 layers


def run_conv_tiles(repeats):
  """Per layer of ``TILE_LAYERS``: CPU ms of one 3x3 stride-1 convolution, forward and both
  gradients (batch 32), by models.fast.direct and by Winograd F(m x m, 3 x 3), m = 2, 4."""
  from afl_jax.models import fast

  rng = np.random.default_rng(0)
  out = {'task': 'conv_tiles', 'devices': 1}
  for size, c in TILE_LAYERS:
    x, dy = (jnp.asarray(rng.normal(size=(BATCH, size, size, c)), jnp.float32) for _ in 'xy')
    w = jnp.asarray(rng.normal(size=(3, 3, c, c)) / np.sqrt(9 * c), jnp.float32)
    routes = {
      'direct': fast.direct((size, size), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),
      'F(2x2)': fast.tiled((size, size), 2),
      'F(4x4)': fast.tiled((size, size), 4),
    }
    steps = {}
    for name, conv in routes.items():

      def step(x, w, dy, conv=conv):
        y, vjp = jax.vjp(conv, x, w)
        return y, *vjp(dy)

      steps[name] = jax.jit(step).lower(x, w, dy).compile()
    best = dict.fromkeys(steps, np.inf)
    for _ in range(max(repeats, 3)):  # interleaved: each route sees the same load
      for name, fn in steps.items():
        best[name] = min(best[name], _cpu_seconds(fn, (x, w, dy), 1))
    out[f'{size}x{size}x{c}'] = {name: 1e3 * t for name, t in best.items()}
  return out


def _torch_step(name, repeats):
  """CPU seconds of one local step of one client of task ``name``'s model in PyTorch, 1 thread
  (scripts/torch_reference.py --time_step), or None without ``--torch_python``."""
  if not _TORCH_PYTHON.value:
    return None
  spec = TASKS[name]
  height, width, channels = (*spec.get('image', (28, 28)), 1)[:3]
  args = [
    _TORCH_PYTHON.value, str(REFERENCE), f'--model={spec["model"]}', '--clients=1',
    f'--image={height},{width},{channels}', f'--batch={BATCH}', f'--rows={_rows(spec)}',
    f'--runs={max(_REPEATS.value, 3)}', '--threads=1', '--time_step',
  ]  # fmt: skip
  proc = subprocess.run(args, capture_output=True, text=True)
  if proc.returncode != 0:
    print(f'PyTorch reference {REFERENCE.name} failed:\n{proc.stderr[-2000:]}')
    return None
  return json.loads(proc.stdout.strip().splitlines()[-1])['step_cpu_s']


def run_conv_profile(repeats):
  """Where one client step of the resnet18 and the cnn task's model goes, as the engine trains it
  (fast_apply, one client at a time), 1 device: milliseconds per kind of XLA op (jax.profiler
  trace, ``repeats`` steps averaged; wall time, so the machine's load inflates every kind)."""
  import glob
  import gzip
  import re
  import tempfile

  out = {'task': 'conv_profile', 'devices': 1}
  for name in ('resnet18', 'cnn'):
    fn, args = _client_step(TASKS[name], 1, True, False)
    jax.block_until_ready(fn(*args))
    scope = dict(re.findall(r'%(\S+) = .*?op_name="([^"]*)"', fn.as_text()))
    with tempfile.TemporaryDirectory() as folder:
      with jax.profiler.trace(folder):
        for _ in range(repeats):
          jax.block_until_ready(fn(*args))
      (path,) = glob.glob(f'{folder}/**/*.trace.json.gz', recursive=True)
      events = json.load(gzip.open(path))['traceEvents']
    kinds = {}
    for e in events:
      if e.get('ph') != 'X' or e['name'] not in scope:  # XLA ops only
        continue
      kind = next(
        (
          k
          for k in ('conv_forward', 'conv_input_grad', 'conv_kernel_grad')
          if k in scope[e['name']]
        ),
        None,
      )
      kind = kind or re.sub(r'\.\d+$', '', e['name'])
      kinds[kind] = kinds.get(kind, 0.0) + e['dur'] / 1e3 / repeats
    out[name] = dict(sorted(kinds.items(), key=lambda kv: -kv[1]))
  return out


# ---- the driver: each measurement in a fresh process -----------------------------------------
LOADS = []  # the load average (1 min) sampled before each process


def _quiet_process(count, conv):
  """A worker process: ``count`` host CPU devices (before JAX starts its backend), ``conv``
  as ``--conv``, its own output discarded (its result, or its exception, comes back)."""
  jax.config.update('jax_num_cpu_devices', count)
  if conv == 'lax':
    models.fast.PLATFORMS = ()
  if conv == 'direct':
    models.winograd.TILES = {}
  for fd in (1, 2):
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


def _spawn(fn, count, *args):
  """``fn(*args)`` in a fresh process on ``count`` host devices (on CPU)."""
  LOADS.append(os.getloadavg()[0])
  context = multiprocessing.get_context('spawn')
  with ProcessPoolExecutor(1, context, _quiet_process, (count, _CONV.value)) as pool:
    return pool.submit(fn, *args).result()


def _reference(task):
  """Run the plain PyTorch loop of ``task`` once (a warm-up job + ``--process_runs`` timed
  runs of the task's work); its JSON. A failure is reported and returns None, so a run's JAX
  results are kept."""
  spec = TASKS[task]
  height, width, channels = (*spec.get('image', (28, 28)), 1)[:3]
  work = dict(
    model=spec['model'], image=f'{height},{width},{channels}', clients=spec['n'],
    concurrency=spec['mc'], buffer=spec['m'], local_steps=spec['k'], batch=BATCH,
    steps=_TORCH_STEPS.value or spec['steps'], rows=_rows(spec), runs=_PROCESS_RUNS.value,
    threads=_TORCH_THREADS.value,
  )  # fmt: skip
  if spec['model'] == 'mlp':
    work['hidden'] = ','.join(map(str, spec['hidden']))
  LOADS.append(os.getloadavg()[0])
  args = [_TORCH_PYTHON.value, str(REFERENCE), *(f'--{k}={v}' for k, v in work.items())]
  proc = subprocess.run(args, capture_output=True, text=True)
  if proc.returncode != 0:
    print(f'PyTorch reference {REFERENCE.name} failed:\n{proc.stderr[-2000:]}')
    return None
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  if out['jobs'] != (jobs := work['steps'] * spec['m']):
    raise RuntimeError(f'{REFERENCE.name} ran {out["jobs"]} jobs; expected {jobs}.')
  return out


def _best_reference(outputs):
  """The best timed run over the reference processes of a run: updates/s and torch version."""
  done = [o for o in outputs if o]
  if not done:
    return None
  best = min(t for o in done for t in o['run_s'])
  return {
    'updates_per_s': done[0]['jobs'] / best,
    'run_s_best': best,
    'processes': len(done),
    'torch': done[0]['torch'],
    'script': REFERENCE.name,
    'updates': done[0]['jobs'],
    'threads': done[0]['threads'],
  }


def run_scaling(task):
  """``(results per device count, ceilings)`` of one task: rounds of fresh processes."""
  mlp = TASKS[task]['model'] == 'mlp'
  referenced = _TORCH_PYTHON.value and TASKS[task]['regime'] == 'per_job'
  found = [_spawn(run_matmul, int(d), task, _PROCESS_RUNS.value) for d in _DEVICES.value if mlp]
  # The ceiling: the best rate of the bare products over the device counts tried.
  ceiling = dict(max(found, key=lambda c: c['matmul_gflops_per_s'])) if found else {}
  runs = {d: [] for d in _DEVICES.value}
  torch_runs = []
  for _ in range(_REPEATS.value):  # rounds: every implementation once, interleaved
    for d in _DEVICES.value:
      runs[d].append(_spawn(run_task, int(d), task, _PROCESS_RUNS.value))
    if referenced:
      torch_runs.append(_reference(task))
  large = max(r['large_matmul_gflops_per_s'] for r in found + sum(runs.values(), []))
  ceiling['large_matmul_gflops_per_s'] = large
  if found:
    ceiling['bare_sgd_gflops_per_s'] = bare = max(c['bare_sgd_gflops_per_s'] for c in found)
    print(
      f'{task:13s} bare local SGD {bare:.1f} GFLOP/s ({100 * bare / large:.0f}% of the large '
      f'product, {large:.1f}): the local steps without the engine; {CPU}',
    )
  torch = _best_reference(torch_runs)
  if torch is not None:
    ceiling['torch'] = torch
  results = []
  for d in _DEVICES.value:
    r = dict(max(runs[d], key=lambda r: r['updates_per_s']))
    r['rounds_updates_per_s'] = [x['updates_per_s'] for x in runs[d]]
    r['fraction_of_matmul_ceiling'] = (
      r['gflops_per_s'] / ceiling['matmul_gflops_per_s'] if found else None
    )
    r['fraction_of_large_matmul'] = r['gflops_per_s'] / large
    r['x_pytorch'] = r['updates_per_s'] / torch['updates_per_s'] if torch else None
    per_update = r['gflops_per_s'] / r['updates_per_s']  # GFLOP of one client update
    r['pytorch_fraction_of_large_matmul'] = (
      torch['updates_per_s'] * per_update / large if torch else None
    )
    results.append(r)
    vs_torch = (
      f', {r["x_pytorch"]:.2f}x PyTorch ({torch["updates_per_s"]:.2f} updates/s, '
      f'{100 * r["pytorch_fraction_of_large_matmul"]:.0f}% of the large product, '
      f'{torch["threads"]} threads)'
      if torch
      else ''
    )
    vs_products = (
      f'{100 * r["fraction_of_matmul_ceiling"]:.0f}% of {ceiling["matmul_gflops_per_s"]:.1f}; '
      if found
      else ''
    )
    print(
      f'{task:13s} devices={r["devices"]} ({r["device"]}): {r["updates_per_s"]:9.2f} updates/s '
      f'{r["gflops_per_s"]:6.1f} GFLOP/s ({vs_products}fraction_of_large_matmul '
      f'{100 * r["fraction_of_large_matmul"]:.0f}% of {large:.1f}){vs_torch}, '
      f'compile {r["compile_s"]:.1f}s, peak {r["peak_memory_mib"]:.0f} MiB; {r["cpu"]}',
    )
  if TASKS[task]['regime'] == 'per_job' and torch is None:
    print(f'{task:13s} PyTorch reference skipped (give --torch_python)')
  return results, ceiling


def main(argv):
  del argv
  sys.stdout.reconfigure(line_buffering=True)  # each line shows as soon as it is printed
  if 'hetero_k' in _TASKS.value:
    hetero = [_spawn(run_hetero_task, 1, t, _REPEATS.value) for t in HETERO]
    for r in hetero:
      p, g = r['padded'], r['grouped']
      print(
        f'{r["task"]:17s} K {r["k_min"]}..{r["k_max"]} (mean {r["k_mean"]:.1f}): useful steps '
        f'{100 * p["useful_fraction"]:.0f}% padded -> {100 * g["useful_fraction"]:.0f}% grouped '
        f'({g["blocks"]} blocks of {g["slots"] // g["blocks"]}); {p["run_s_best"]:.2f}s -> '
        f'{g["run_s_best"]:.2f}s: speed-up {r["speedup"]:.2f}x; '
        f'max abs diff {r["max_abs_diff"]:.1e}; {CPU}'
      )
    print(json.dumps({'hetero_k': hetero}))
  if 'conv_step' in _TASKS.value:
    r = _spawn(run_conv_step, 1, _REPEATS.value) | {'cpu': CPU}
    large = r['large_matmul_gflops_per_cpu_s'] * 1e9
    for name in CONV_STEP:  # the PyTorch step on the same CPU, its rate over the same product
      LOADS.append(os.getloadavg()[0])
      seconds = _torch_step(name, _REPEATS.value)
      if seconds is not None:
        flops = flops_per_update(TASKS[name]) / TASKS[name]['k']
        r[f'{name}: PyTorch, 1 thread'] = {'cpu_s': seconds, 'fraction': flops / seconds / large}
    for key, v in r.items():
      if isinstance(v, dict) and 'cpu_s' in v:
        print(
          f'conv_step     {key}: {1e3 * v["cpu_s"]:.1f} ms CPU per client step, '
          f'{100 * v["fraction"]:.0f}% of the large product ({CPU})'
        )
    print(json.dumps({'conv_step': r}))
  if 'conv_tiles' in _TASKS.value:
    r = _spawn(run_conv_tiles, 1, _REPEATS.value) | {'cpu': CPU}
    for layer in (f'{size}x{size}x{c}' for size, c in TILE_LAYERS):
      ms = r[layer]
      print(
        f'conv_tiles    {layer}: ms CPU (forward and both gradients) '
        + ', '.join(f'{k} {v:.1f} ({ms["direct"] / v:.2f}x)' for k, v in ms.items())
        + f' ({CPU})'
      )
    print(json.dumps({'conv_tiles': r}))
  if 'conv_profile' in _TASKS.value:
    r = _spawn(run_conv_profile, 1, _REPEATS.value) | {'cpu': CPU}
    for name in ('resnet18', 'cnn'):
      total = sum(r[name].values())
      print(f'conv_profile  {name}: one client step {total:.1f} ms of XLA ops ({CPU}):')
      for kind, ms in list(r[name].items())[:12]:
        print(f'    {ms:9.1f} ms {100 * ms / total:5.1f}%  {kind}')
    print(json.dumps({'conv_profile': r}))
  if 'sweep' in _TASKS.value:
    count = int(_DEVICES.value[-1]) if len(_DEVICES.value) == 1 else 2
    sweeps = [_spawn(run_sweep_task, count, m) for m in SWEEP_MODELS]
    sweeps.append(_spawn(run_sweep_memory, count))
    for r in sweeps[:-1]:
      print(
        f'{r["task"]:13s} devices={r["devices"]} ({r["mode"]}): {r["runs"]} runs one after '
        f'another {r["sequential_s"]:.1f}s (compiles {r["sequential_compile_s"]:.1f}s) vs one '
        f'sweep {r["sweep_s"]:.1f}s (compile {r["sweep_compile_s"]:.1f}s): speed-up '
        f'{r["speedup"]:.1f}x ({r["speedup_without_compile"]:.1f}x without compiles); {CPU}'
      )
    m = sweeps[-1]
    print(
      f'sweep memory: default task {m["one_replica_mib"]:.0f} MiB for 1 replica, '
      f'+{m["per_replica_mib"]:.0f} MiB per replica: {m["max_replicas"]} replicas fit in '
      f'{m["limit_gib"]:.0f} GiB'
    )
    print(json.dumps({'sweeps': sweeps}))
  tasks = [t for t in _TASKS.value if t in TASKS]
  if not tasks:
    return
  results, ceilings = [], {}
  for task in tasks:
    rows, ceilings[task] = run_scaling(task)
    results += rows
  LOADS.append(os.getloadavg()[0])
  load_range = (min(LOADS), max(LOADS))
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
      summary
      | dict(results=results, matmul_ceilings=ceilings, load_average_1min=load_range, cpu=CPU)
    )
  )


def write_docs(results, ceilings, load_range):
  """Rewrite the measured part of docs/performance.md (its first paragraph and table).

  The rest of the page (how to read the table, the GPU figures, the analysis and the
  sweep / hetero_k sections) is kept as it is.
  """
  path = pathlib.Path(__file__).parent.parent / 'docs' / 'performance.md'
  refs = [c['torch'] for c in ceilings.values() if c.get('torch')]
  torch_versions = sorted(
    {f'{t["torch"]} (CPU, torch.set_num_threads({t["threads"]}))' for t in refs}
  )
  rows = []
  percent = lambda v: '-' if v is None else f'{100 * v:.0f}%'
  for r in results:
    c = ceilings[r['task']]
    torch, products = c.get('torch'), c.get('matmul_gflops_per_s')
    rows.append(
      {
        'task': r['task'],
        'devices': r['devices'],
        'client updates/s': f'{r["updates_per_s"]:.1f}',
        'GFLOP/s': f'{r["gflops_per_s"]:.1f}',
        'same-shape products GFLOP/s': '-' if products is None else f'{products:.1f}',
        'fraction': percent(r['fraction_of_matmul_ceiling']),
        'large product GFLOP/s': f'{c["large_matmul_gflops_per_s"]:.1f}',
        'fraction_of_large_matmul': percent(r['fraction_of_large_matmul']),
        'bare local SGD fraction': percent(
          c['bare_sgd_gflops_per_s'] / c['large_matmul_gflops_per_s'] if products else None
        ),
        'PyTorch updates/s': f'{torch["updates_per_s"]:.1f}' if torch else '-',
        'PyTorch fraction': percent(r['pytorch_fraction_of_large_matmul']) if torch else '-',
        'x PyTorch': f'{r["x_pytorch"]:.2f}x' if torch else '-',
        'compile s': f'{r["compile_s"]:.1f}',
        'analytic state MiB': f'{r["analytic_memory_mib"]:.0f}',
        'peak RSS MiB': f'{r["peak_memory_mib"]:.0f}',
      }
    )
  measured = (
    f'Measured by `{" ".join(["python scripts/benchmark.py", *sys.argv[1:]])}` on '
    f'{CPU} ({platform.machine()}), JAX {jax.__version__} '
    f'({jax.default_backend()})'
    + (f', PyTorch {", ".join(torch_versions)}' if torch_versions else '')
    + f', {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}. Best of {_REPEATS.value} '
    f'rounds (each a fresh process per device count, best of {_PROCESS_RUNS.value} timed runs, '
    'and the PyTorch loop, interleaved); compile time apart. Load average (1 min) sampled '
    f'before each process: {load_range[0]:.1f}-{load_range[1]:.1f} on {os.cpu_count()} cores.'
  )
  table = pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)
  # The page's title, measured paragraph and table are its first three blocks; the rest stays.
  old = path.read_text().split('\n\n', 3) if path.exists() else []
  workdir_lib.write_text(  # a temporary, then a rename; never through a link
    path, f'# Performance\n\n{measured}\n\n{table}\n' + (f'\n{old[3]}' if len(old) == 4 else '')
  )


if __name__ == '__main__':
  cli.run(main)
