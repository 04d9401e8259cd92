"""One process of a multi-process afl_jax run (one CPU device each, gloo collectives), started
once per process but for ``--process_id``. Writes ``OUT/process_<id>.npz``: per case the
global params after every step and the final per-client state, the device layout and what
:func:`coordination` saw; tests/distributed_test.py compares them with :func:`run_cases`."""

from __future__ import annotations

import argparse
import os
import sys
import time

ALL_CASES = ('fedbuff', 'asynfl', 'sweep')


def run_cases(checkpoint_dir: str | None = None, cases=('fedbuff', 'asynfl')) -> dict:
  """'fedbuff' (per-job), 'asynfl' (always-on, per-client state sharded) and 'sweep' (2
  FedBuff replicas) on a tiny logistic problem; with ``checkpoint_dir`` AsynFL is saved with
  orbax after its first chunk, restored and finished ('resumed'). Returns ``{name: {'params':
  [T, 5], 'clients': [leaves], 'resumed': [T - 4, 5]}}`` in float64 on every process."""
  import jax
  import numpy as np
  from jax.experimental import multihost_utils

  import afl_jax
  from afl_jax.pipeline.checkpoint import Checkpointer

  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  from helpers.sim_runs import chunks
  from quadratic import logistic_problem

  n = 8  # divisible by 2 devices: per-client state is sharded, not replicated
  problem = logistic_problem(n, 16, 5)
  p0 = {'w': np.zeros(5, np.float32), 'b': np.zeros((), np.float32)}
  buffered = afl_jax.schedules.fedbuff(n, 5, 3, 10, local_steps=3, seed=0)
  durations = afl_jax.schedules.durations.make('uniform', low=0.3, high=2.5)
  windows = afl_jax.schedules.waiting_windows(n, 8, window=1.0, durations=durations, local_steps=2)
  runs = {
    'fedbuff': (afl_jax.algorithms.make('fedbuff', client_lr=0.3), buffered),
    'asynfl': (afl_jax.algorithms.make('asynfl', client_lr=0.3, num_clients=n), windows),
  }
  key, out, t0 = jax.random.key(0), {}, time.time()
  for name in [c for c in cases if c in runs]:
    alg, sched = runs[name]
    sim = afl_jax.Simulator(alg, problem, sched, chunk_size=4, record_params=True)
    hist, ckpt = [], None
    for state, o in chunks(sim, sim.init(p0, key), key):
      hist.append(np.asarray(o['params']['w'], np.float64))
      if checkpoint_dir and ckpt is None and name == 'asynfl':
        ckpt = Checkpointer(os.path.join(checkpoint_dir, name), name)
        ckpt.save(sim.position(state), state, {'chunks': np.asarray(len(hist))})
    clients = [  # per-client state may be sharded over processes: gather it to every one
      np.asarray(multihost_utils.process_allgather(leaf, tiled=True), np.float64)
      for leaf in jax.tree.leaves(state.clients)
    ]
    out[name] = {'params': np.concatenate(hist), 'clients': clients}
    if ckpt is not None:
      state, _ = ckpt.restore(ckpt.steps()[-1], sim.init(p0, key), {'chunks': np.asarray(0)})
      resumed = [np.asarray(o['params']['w'], np.float64) for _, o in chunks(sim, state, key)]
      out[name]['resumed'] = np.concatenate(resumed)
      ckpt.close()
    print(f'process {jax.process_index()}: {name} done at {time.time() - t0:.1f} s', flush=True)
  if 'sweep' in cases:  # R = 2 runs of FedBuff in one program (client_lr per replica)
    keys = jax.random.split(jax.random.key(1), 2)
    res = afl_jax.sweep(
      'fedbuff', problem, buffered, p0, keys, client_lr=[0.1, 0.3], record_params=True
    )
    out['sweep'] = {
      'params': np.asarray(res.params_history['w'], np.float64),
      'clients': [np.asarray(res.metrics['arrivals'], np.float64)],
    }
  return out


def coordination() -> dict:
  """afl_jax.pipeline.processes across the processes: ``on_writer`` gives process 0's result
  (JSON values) to every process, and its refusal; ``agreed`` makes a refusal seen on
  process 1 alone every process's (its own words on 1, named on 0)."""
  import jax
  import numpy as np

  from afl_jax.errors import UserError
  from afl_jax.pipeline import processes

  told = processes.on_writer(lambda: [jax.process_index() + 7, None], 'a list')
  said = {}
  for name, call in (
    ('on_writer', lambda: processes.on_writer(lambda: _refuse(0), 'a check on 0')),
    ('agreed', lambda: processes.agreed(lambda: _refuse(1), 'a check')),
  ):
    try:
      call()
      said[name] = ''
    except UserError as e:
      said[name] = str(e)
  return {'told': np.asarray(told[0]), 'told_none': np.asarray(told[1] is None)} | {
    f'said_{k}': np.asarray(v) for k, v in said.items()
  }


def _refuse(process: int) -> int:
  import jax

  from afl_jax.errors import ConfigError

  if jax.process_index() == process:
    raise ConfigError(f'config.x=1 is invalid: seen on process {process} only')
  return jax.process_index()


def main(argv: list[str]) -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument('--num_processes', type=int, default=1)
  ap.add_argument('--process_id', type=int, default=0)
  ap.add_argument('--coordinator', default='127.0.0.1:12355')
  ap.add_argument('--out', required=True)
  ap.add_argument('--timeout', type=int, default=60)
  ap.add_argument('--cases', default='fedbuff,asynfl', help=f'comma list of {ALL_CASES}')
  ap.add_argument('--checkpoint_dir', default='', help='also checkpoint, restore and resume')
  args = ap.parse_args(argv)
  os.environ['AFL_JAX_CPU_DEVICES'] = '1'  # one CPU device per process, before JAX starts
  os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=1'
  import jax
  import numpy as np

  if args.num_processes > 1:
    jax.config.update('jax_cpu_collectives_implementation', 'gloo')
    jax.distributed.initialize(
      coordinator_address=args.coordinator,
      num_processes=args.num_processes,
      process_id=args.process_id,
      local_device_ids=[0],
      initialization_timeout=args.timeout,
      heartbeat_timeout_seconds=args.timeout,
      shutdown_timeout_seconds=args.timeout,
    )
  results = run_cases(args.checkpoint_dir or None, tuple(args.cases.split(',')))
  arrays = {
    'process_index': np.asarray(jax.process_index()),
    'process_count': np.asarray(jax.process_count()),
    'global_devices': np.asarray(len(jax.devices())),
    'local_devices': np.asarray(len(jax.local_devices())),
  }
  for name, r in results.items():
    arrays[f'{name}/params'] = r['params']
    arrays.update({f'{name}/client_{i}': leaf for i, leaf in enumerate(r['clients'])})
    if 'resumed' in r:
      arrays[f'{name}/resumed'] = r['resumed']
  if args.num_processes > 1:
    arrays.update(coordination())
  os.makedirs(args.out, exist_ok=True)
  np.savez(os.path.join(args.out, f'process_{args.process_id}.npz'), **arrays)
  if args.num_processes > 1:
    jax.distributed.shutdown()
  print(f'process {args.process_id}: done', flush=True)


if __name__ == '__main__':
  main(sys.argv[1:])
