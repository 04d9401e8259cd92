"""One process of a multi-process afl_jax run (JAX's distributed runtime, CPU collectives).

Usage (one line per process, same arguments except the process id)::

  python tests/helpers/distributed_run.py --num_processes=2 --process_id=0 \\
    --coordinator=127.0.0.1:PORT --out=DIR [--cases=fedbuff,asynfl,sweep] [--checkpoint_dir=C]
  python tests/helpers/distributed_run.py --num_processes=2 --process_id=1 \\
    --coordinator=127.0.0.1:PORT --out=DIR [--cases=fedbuff,asynfl,sweep] [--checkpoint_dir=C]

Each process owns one CPU device, so ``afl_jax.core.engine.default_mesh()`` spans 2
devices in 2 processes; the client axis (or, for 'sweep', the replica axis) is sharded
across the processes and every cross-device reduction goes over the CPU collectives
(gloo). With ``--num_processes=1``
no distributed runtime is started (the 1-process reference). Every process writes
``DIR/process_<id>.npz`` holding, per case, the global params after every server step
and the final per-client state (gathered from all processes), plus its device layout.

``tests/distributed_test.py`` starts the processes and compares the iterates with a
1-process run of :func:`run_cases` (the same function).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _setup(num_processes: int, process_id: int, coordinator: str, timeout_s: int) -> None:
  """One CPU device per process; start the distributed runtime (before any JAX compute)."""
  os.environ['AFL_JAX_CPU_DEVICES'] = '1'
  os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=1'
  import jax

  if num_processes > 1:
    jax.config.update('jax_cpu_collectives_implementation', 'gloo')
    jax.distributed.initialize(
      coordinator_address=coordinator,
      num_processes=num_processes,
      process_id=process_id,
      local_device_ids=[0],
      initialization_timeout=timeout_s,
      heartbeat_timeout_seconds=timeout_s,
      shutdown_timeout_seconds=timeout_s,
    )


# Checkpointed and resumed when --checkpoint_dir is given: the always-on case, whose
# per-client state is sharded over the processes (each writes its own shards).
CHECKPOINTED = ('asynfl',)
# Runs by name: 'fedbuff' (per-job), 'asynfl' (always-on, sharded per-client state),
# 'sweep' (the replica axis: 2 FedBuff runs in one program, replicas sharded).
CASES = ('fedbuff', 'asynfl')
ALL_CASES = ('fedbuff', 'asynfl', 'sweep')


def _checkpointer_class():
  """The project's orbax checkpointer, wherever the pipeline keeps it (None if absent)."""
  import importlib

  for module in ('afl_jax.pipeline.checkpoint', 'afl_jax.checkpointing'):
    try:
      return importlib.import_module(module).Checkpointer
    except (ImportError, AttributeError):
      continue
  return None


def run_cases(checkpoint_dir: str | None = None, cases: tuple[str, ...] = CASES) -> dict:
  """The runs named in ``cases`` (see ``ALL_CASES``) on a tiny logistic problem.

  Every run uses the default mesh (all devices of all processes). With
  ``checkpoint_dir``, the runs named in ``CHECKPOINTED`` are also checkpointed with
  orbax after their first chunk, restored into a fresh state and continued to the end
  (the resumed iterates are returned beside the uninterrupted ones).

  Returns:
    ``{name: {'params': [T, 5], 'clients': [leaves], 'resumed': [T - chunk, 5]}}`` as
    float64 host NumPy on every process ('resumed' only for checkpointed runs).
  """
  import jax
  import numpy as np
  from jax.experimental import multihost_utils

  import afl_jax

  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  from helpers.sim_runs import chunks
  from quadratic import logistic_problem

  n = 8  # divisible by 2 devices: per-client state is sharded, not replicated
  problem = logistic_problem(n, 16, 5)
  p0 = {'w': np.zeros(5, np.float32), 'b': np.zeros((), np.float32)}
  buffered = afl_jax.schedules.fedbuff(n, 5, 3, 10, local_steps=3, seed=0)
  windows = afl_jax.schedules.waiting_windows(
    n,
    8,
    window=1.0,
    durations=afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5),
    local_steps=2,
  )
  runs = {
    'fedbuff': (afl_jax.algorithms.get('fedbuff', client_lr=0.3), buffered),
    'asynfl': (afl_jax.algorithms.get('asynfl', client_lr=0.3, num_clients=n), windows),
  }
  checkpointer = _checkpointer_class() if checkpoint_dir else None
  key = jax.random.key(0)
  out = {}
  t0 = time.time()
  for name, (alg, sched) in runs.items():
    if name not in cases:
      continue
    sim = afl_jax.Simulator(alg, problem, sched, chunk_size=4, record_params=True)
    hist, ckpt = [], None
    for state, o in chunks(sim, sim.init(p0, key), key):
      hist.append(np.asarray(o['params']['w'], np.float64))
      if checkpointer is not None and ckpt is None and name in CHECKPOINTED:
        ckpt = checkpointer(os.path.join(checkpoint_dir, name))
        ckpt.save(sim.position(state), state, {'chunks': np.asarray(len(hist))})
    # Per-client state may be sharded over processes: gather it to every process.
    clients = [
      np.asarray(multihost_utils.process_allgather(leaf, tiled=True), np.float64)
      for leaf in jax.tree.leaves(state.clients)
    ]
    out[name] = {'params': np.concatenate(hist), 'clients': clients}
    if ckpt is not None:  # Resume from the checkpoint into a fresh state and finish.
      template = sim.init(p0, key)
      state, _ = ckpt.restore(ckpt.latest_step(), template, {'chunks': np.asarray(0)})
      resumed = [np.asarray(o['params']['w'], np.float64) for _, o in chunks(sim, state, key)]
      out[name]['resumed'] = np.concatenate(resumed)
      ckpt.close()
    print(f'process {jax.process_index()}: {name} done at {time.time() - t0:.1f} s', flush=True)
  if 'sweep' not in cases:
    return out
  # Replica axis: R = 2 runs of FedBuff (client_lr per replica) in one program; with 2
  # devices the replicas are sharded over the processes (one replica each).
  from afl_jax.api import sweep

  keys = jax.random.split(jax.random.key(1), 2)
  res = sweep('fedbuff', problem, buffered, p0, keys, client_lr=[0.1, 0.3], record_params=True)
  out['sweep'] = {
    'params': np.asarray(res.params_history['w'], np.float64),
    'clients': [np.asarray(res.metrics['arrivals'], np.float64)],
  }
  print(f'process {jax.process_index()}: sweep done at {time.time() - t0:.1f} s', flush=True)
  return out


def main(argv: list[str]) -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument('--num_processes', type=int, default=1)
  ap.add_argument('--process_id', type=int, default=0)
  ap.add_argument('--coordinator', default='127.0.0.1:12355')
  ap.add_argument('--out', required=True)
  ap.add_argument('--timeout', type=int, default=60)
  ap.add_argument('--cases', default=','.join(CASES), help=f'comma list of {ALL_CASES}')
  ap.add_argument('--checkpoint_dir', default='', help='also checkpoint, restore and resume')
  args = ap.parse_args(argv)
  _setup(args.num_processes, args.process_id, args.coordinator, args.timeout)
  import jax
  import numpy as np

  results = run_cases(args.checkpoint_dir or None, tuple(args.cases.split(',')))
  arrays = {
    'process_index': np.asarray(jax.process_index()),
    'process_count': np.asarray(jax.process_count()),
    'global_devices': np.asarray(len(jax.devices())),
    'local_devices': np.asarray(len(jax.local_devices())),
  }
  for name, r in results.items():
    arrays[f'{name}/params'] = r['params']
    for i, leaf in enumerate(r['clients']):
      arrays[f'{name}/client_{i}'] = leaf
    if 'resumed' in r:
      arrays[f'{name}/resumed'] = r['resumed']
  os.makedirs(args.out, exist_ok=True)
  np.savez(os.path.join(args.out, f'process_{args.process_id}.npz'), **arrays)
  if args.num_processes > 1:
    jax.distributed.shutdown()
  print(f'process {args.process_id}: done', flush=True)


if __name__ == '__main__':
  main(sys.argv[1:])
