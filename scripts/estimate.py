"""Estimate a run's memory and time before starting it (paper-scale configs).

  python scripts/estimate.py --config=configs/paper_cifar10.py:masfl
  python scripts/estimate.py --config=configs/paper_cifar10.py:fedfa --probe_steps=5

Prints, without running the simulation:

* the engine's analytic memory of the run (``afl_jax.core.memory``: per-client state,
  ring buffer, server state, client data, stacked messages, one step's working set),
  computed from abstract shapes (``jax.eval_shape`` of the engine's init; nothing of
  the run's state is allocated), against what this machine's backend reports;
* the client steps the run computes: *useful* (the local steps of the arrivals the
  schedule sends) and *computed* by the engine as it plans the run here
  (``Simulator.step_work``: every arrival slot of a step, padded to the devices, runs
  the largest K of its block, masked; always-on runs train every client every step);
* a time estimate from a short probe on this machine: ``--probe_steps`` jitted SGD
  steps (after one compile) of one block of the engine's arrival slots, trained as the
  engine trains it (``afl_jax.core.engine.train_clients``: ``block_size`` clients, each its
  own params and batch of ``batch_size``, vmapped, or one at a time on each device where
  the model convolves on CPU), sharded over the devices, through the model the run trains
  (``afl_jax.models.fast_apply``); the block's time per client step times the computed
  client steps, plus one timed evaluation per evaluation of the run; with the XLA FLOP
  count of one client step, to rescale to another device.

A config with a ``sweep`` section is estimated at every grid point (each built as the
sweep builds it): one line per point (memory of one run, client steps, time) and the
totals, with the grid points that train.py would refuse (memory of one local step,
time above $AFL_JAX_MAX_HOURS: :func:`afl_jax.pipeline.sizes.check_work`) named.

When the dataset's files are not present, random data of the dataset's shapes is
used (labels balanced like the real set, so client sizes and K come out the same
in distribution). Not counted: the server step, batch sampling and messages
(small beside the clients' training for these models), and compiles.
"""

from __future__ import annotations

import contextlib
import os
import time

from afl_jax.pipeline import cache
from afl_jax.pipeline.devices import set_cpu_devices

cache.use_checkout(__file__)  # configs/ of this checkout, also after a regular pip install
set_cpu_devices()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from matplotlib import ticker  # noqa: E402

from afl_jax import data, models  # noqa: E402
from afl_jax.core import engine, memory  # noqa: E402
from afl_jax.pipeline import build as build_lib  # noqa: E402
from afl_jax.pipeline import cli  # noqa: E402
from afl_jax.pipeline import sweep as sweep_lib  # noqa: E402

_CONFIG = cli.define_config_flag('configs/paper_cifar10.py:masfl')
_PROBE = flags.DEFINE_integer(
  'probe_steps', 3, 'Timed client steps (after one compile).', lower_bound=1
)
_RANDOM = flags.DEFINE_bool('random_data', False, 'Use random data even if the files exist.')

# (train samples, test samples, image shape) of the file-backed datasets.
SHAPES = {
  'cifar10': (50000, 10000, (32, 32, 3)),
  'fmnist': (60000, 10000, (28, 28)),
}


def random_dataset(name: str, seed: int = 0) -> data.ArrayDataset:
  """uint8 images of ``name``'s shapes with exactly balanced labels (like CIFAR-10/FMNIST)."""
  n_train, n_test, shape = SHAPES[name]
  rng = np.random.default_rng(seed)
  labels = lambda n: rng.permutation(np.arange(n) % 10).astype(np.int32)
  images = lambda n: rng.integers(0, 256, (n,) + shape, dtype=np.uint8)
  return data.ArrayDataset(images(n_train), labels(n_train), images(n_test), labels(n_test), 10)


def build_run(config, point: bool = False) -> tuple[build_lib.Run, str]:
  """The built run, planned as train.py plans it but with a refusal kept in ``Run.refusal``
  (``point``: a sweep's grid point, built as the sweep builds it), and where its data came
  from."""

  def built(dataset=None):
    if point:
      return build_lib.plan(build_lib.build_point(config, dataset=dataset), strict=False)
    return build_lib.build_run(config, dataset=dataset, strict=False)

  reason = '--random_data'
  if not _RANDOM.value:
    try:
      return built(), 'the dataset files'
    except data.DataError as e:
      if config.dataset not in SHAPES:
        raise
      reason = str(e).splitlines()[0]
  run = built(random_dataset(config.dataset))
  return run, f'random data of the real shapes ({reason})'


def probe(run: build_lib.Run, steps: int, clients: int) -> tuple[float, float, float | None]:
  """(compile seconds, seconds per client step, FLOPs per client step) on this machine:
  ``steps`` SGD steps of ``clients`` clients, trained as the engine trains a block of arrival
  slots (:func:`engine.train_clients`, sharded over the devices when they divide them)."""
  c, devices = run.config, jax.devices()
  spread = clients % len(devices) == 0
  mesh = Mesh(np.array(devices), (engine.CLIENT_AXIS,))
  clients_axis = NamedSharding(mesh, P(engine.CLIENT_AXIS))
  put = lambda a: jax.device_put(a, clients_axis) if spread else jnp.asarray(a)
  rng = np.random.default_rng(0)
  x = put(rng.normal(size=(clients, c.batch_size, *run.data.x.shape[1:])).astype(run.dtype))
  y = put(np.tile(np.arange(c.batch_size) % run.data.num_classes, (clients, 1)).astype(np.int32))
  params = jax.tree.map(lambda p: put(np.broadcast_to(p, (clients, *p.shape))), run.params0)

  def one(params, x, y):
    loss, grads = jax.value_and_grad(run.problem.loss_fn)(params, (x, y))
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), loss

  @jax.jit
  def step(params, x, y):
    return engine.train_clients(one, (params, x, y), (0, 0, 0), mesh if spread else None)

  t0 = time.perf_counter()
  compiled = step.lower(params, x, y).compile()
  compile_s = time.perf_counter() - t0
  flops = None
  with contextlib.suppress(Exception):  # optional, backend-specific: one client's program
    first = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), (params, x, y))
    cost = jax.jit(one).lower(*first).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = float(cost['flops']) or None
  params, loss = jax.block_until_ready(compiled(params, x, y))
  t0 = time.perf_counter()
  for _ in range(steps):
    params, loss = compiled(params, x, y)
  jax.block_until_ready(loss)
  return compile_s, (time.perf_counter() - t0) / steps / clients, flops


def _seconds(fn) -> float:
  """Seconds of one call of ``fn()`` after a first call (its compile)."""
  jax.block_until_ready(fn())
  t0 = time.perf_counter()
  jax.block_until_ready(fn())
  return time.perf_counter() - t0


def evaluation_seconds(run: build_lib.Run) -> float:
  """Seconds of one evaluation, from its parts timed after their compile: the evaluator's
  main function on one test batch (with the training sample's loss and gradient), and one
  test batch alone for each further test and validation batch."""
  ev, params = run.evaluator, run.params0
  first = tuple(a[:1] for a in ev.test)
  with_train = _seconds(lambda: ev.fns.main(params, first, ev.train))
  batch = _seconds(lambda: ev.fns.held_out(params, *first))
  batches = ev.test[0].shape[0] - 1 + (0 if ev.val is None else ev.val[0].shape[0])
  return with_train + batches * batch


_flop = ticker.EngFormatter(unit='FLOP', places=1)  # e.g. '4.5 GFLOP'


def _hours(s: float) -> str:
  return f'{s / 3600:.1f} h' if s >= 3600 else f'{s / 60:.1f} min'


def main(argv):
  del argv
  config = _CONFIG.finish()
  if sweep_lib.sweep_axes(config.get('sweep', {})):
    return estimate_sweep(config)
  t0 = time.perf_counter()
  run, source = build_run(config)
  build_s = time.perf_counter() - t0
  c, s = run.config, run.schedule
  report, sim, refused = run.memory, run.sim, run.refusal
  avail = memory.available_bytes()
  device = jax.devices()[0]
  n_params = models.count_params(run.params0)
  print(f'config: {c.algorithm} on {c.dataset} with {c.model} ({n_params:,} params)')
  print(f'data: {source}; built in {build_s:.1f} s')
  print(
    f'run: N={run.data.num_clients} clients, T={s.num_steps} server steps, '
    f'{sim.num_slots} arrival slots/step, K median {int(np.median(run.local_steps))} '
    f'max {s.max_local_steps}, batch {c.batch_size}, tau_avg {s.stats()["tau_avg"]:.2f}, '
    f'regime {run.algorithm.regime}'
  )
  print(memory.format_report(report))
  fits = 'fits' if avail is None or report['total'] <= 0.9 * avail else 'does NOT fit'
  print(
    f'memory: {memory.format_bytes(report["total"])} analytic; this machine '
    f'({len(jax.devices())} x {device.platform} ({device.device_kind})) reports '
    f'{memory.format_bytes(avail) if avail else "unknown"} available: {fits} (90% usable)'
  )
  useful, computed = sim.step_work
  steps = (
    f'client steps: {useful:,} useful, {computed:,} computed by the engine '
    f'({useful / max(computed, 1):.0%} useful)'
  )
  if refused:  # not probed: train.py would not start it, and the probe might not fit either
    print(f'{steps}\ntrain.py would refuse this run: {refused}')
    return
  compile_s, per_step, flops = probe(run, _PROBE.value, sim.block_size)
  evals = -(-s.num_steps // c.eval_every) + 1
  eval_s = evals * evaluation_seconds(run)
  print(
    f'probe: {_PROBE.value} local steps of a block of {sim.block_size} clients (batch '
    f'{c.batch_size}, as the engine trains them on {len(jax.devices())} {device.platform} '
    f'devices): '
    f'{per_step:.3f} s per client step (compile {compile_s:.1f} s)'
    + (f', {_flop(flops)}/step (XLA)' if flops else '')
    + f'; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}'
  )
  print(steps)
  print(
    f'time on this machine: ~{_hours(computed * per_step + eval_s)} '
    f'({_hours(computed * per_step)} training at {per_step:.3f} s/step, {_hours(eval_s)} for '
    f'{evals} evaluations); ~{_hours(useful * per_step + eval_s)} if only useful steps were '
    'computed'
  )
  if flops:
    print(
      f'work: {_flop(computed * flops)} of client training computed '
      f'({_flop(useful * flops)} useful)'
    )


def estimate_sweep(config) -> None:
  """One line per grid point of ``config.sweep`` (built as the sweep builds it) and totals.

  The probe runs once per distinct (model, batch size, dtype, block size) among the points.
  """
  points = sweep_lib.grid(config)
  device = jax.devices()[0]
  print(
    f'sweep: {len(points)} grid points of {config.algorithm} on {config.dataset} '
    f'({", ".join(f"{len(v)} {k}" for k, v in sweep_lib.sweep_axes(config.sweep).items())}); '
    f'{len(jax.devices())} x {device.platform} ({device.device_kind})'
  )
  probes: dict[tuple, tuple[float, float]] = {}
  total_s = total_mem = steps_useful = steps_computed = 0
  refused = []
  for point in points:
    run = build_run(sweep_lib.point_config(config, point), point=True)[0]
    c, report, sim, why = run.config, run.memory, run.sim, run.refusal
    name = sweep_lib.run_name(point)
    useful, computed = sim.step_work
    steps_useful, steps_computed = steps_useful + useful, steps_computed + computed
    total_mem = max(total_mem, report['total'])
    if why:  # not probed: train.py would not start it (the probe might not fit either)
      refused.append(f'{name}: {why}')
      print(
        f'  {name}: memory {memory.format_bytes(report["total"])}, client steps {useful:,} '
        f'useful / {computed:,} computed (REFUSED)'
      )
      continue
    key = (c.model, str(c.get('model_args')), c.dataset, int(c.batch_size), c.dtype)
    key += (sim.block_size,)
    if key not in probes:
      probes[key] = probe(run, _PROBE.value, sim.block_size)[1], evaluation_seconds(run)
    per_step, one_eval = probes[key]
    evals = -(-run.schedule.num_steps // c.eval_every) + 1
    seconds = computed * per_step + evals * one_eval
    total_s += seconds
    print(
      f'  {name}: memory {memory.format_bytes(report["total"])}, client steps {useful:,} '
      f'useful / {computed:,} computed, ~{_hours(seconds)}'
    )
  print(
    f'total: {steps_useful:,} useful / {steps_computed:,} computed client steps, '
    f'~{_hours(total_s)} on this machine if the runs went one after another (a sweep '
    f'stacks runs of one group: often faster); largest run {memory.format_bytes(total_mem)} '
    'analytic'
  )
  for line in refused:
    print(f'train.py would refuse grid point {line}')


if __name__ == '__main__':
  cli.run(main, config=_CONFIG)
