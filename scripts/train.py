"""Train one algorithm from a config.

  python scripts/train.py --config=configs/fmnist.py:fedbuff --workdir=runs/fedbuff \
      --config.num_rounds=300 --config.hparams.client_lr=0.02

A config with a ``sweep`` section runs its grid (afl_jax/pipeline/sweep.py). Any
hyperparameter the algorithm takes can be set with ``--config.hparams.NAME=VALUE``
(even when the config file does not name it). Every user error (config, command
line, data, partition, schedule, memory, resume) ends as one line
``error: config.FIELD=VALUE is invalid: ...`` with exit status 1.

Several processes, one run (JAX's distributed runtime, docs/distributed.md): start
the same command once per process with ``--num_processes=P --process_id=i
--coordinator=HOST:PORT`` (``--coordinator=auto``: detected from SLURM and the like).
Process 0 writes the metrics, TensorBoard events, plot, summary and config; every
process writes its checkpoint shards. ``--workdir`` must be on a shared filesystem.

One writer per workdir (afl_jax/pipeline/workdir.py): the workdir is locked first
thing, before JAX is imported, so a second invocation on a busy workdir is refused
with one line naming the holder's pid and host at once.

Exit status: 0 when the run (every run of a sweep) completed; 1 with one line for a
user error, or a run (any run of a sweep) that diverged (``stopped: ...``, the sweep's
line counts them); 130 with one line on Ctrl-C (the metrics so far are kept, and the
same command continues from the last checkpoint).
"""

import importlib.util
import os
import sys


def _lock_workdir():
  """Lock --workdir before anything else (afl_jax/pipeline/workdir.py, standard library only).

  Loaded by path: importing the afl_jax package would import JAX first (seconds).
  """
  found = importlib.util.find_spec('afl_jax')
  if found is None or not found.origin:
    sys.exit('error: afl_jax is not installed; run bash scripts/setup.sh in the repository')
  path = os.path.join(os.path.dirname(found.origin), 'pipeline', 'workdir.py')
  spec = importlib.util.spec_from_file_location('_afl_jax_workdir_lock', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.lock_from_argv(sys.argv, default='runs/default')


try:  # Ctrl-C while JAX is imported: one line too, nothing written yet
  _LOCK = _lock_workdir()

  from afl_jax.pipeline import cache
  from afl_jax.pipeline.devices import set_cpu_devices

  cache.use_checkout(__file__)  # configs/ of this checkout, also after a regular pip install
  set_cpu_devices()

  from absl import flags

  from afl_jax.errors import UserError
  from afl_jax.pipeline import cli, loop
except KeyboardInterrupt:
  print('interrupted (Ctrl-C) before the run started; nothing was written', file=sys.stderr)
  sys.exit(130)

_CONFIG = cli.define_config_flag('configs/default.py')
_WORKDIR = flags.DEFINE_string('workdir', 'runs/default', 'Output directory.')
_COORDINATOR = flags.DEFINE_string(
  'coordinator',
  '',
  "host:port of process 0 for a multi-process run ('auto': detect, e.g. under SLURM; "
  "'': one process unless --num_processes > 1, then $JAX_COORDINATOR_ADDRESS).",
)
_NUM_PROCESSES = flags.DEFINE_integer('num_processes', 1, 'Processes of a multi-process run.')
_PROCESS_ID = flags.DEFINE_integer('process_id', 0, 'This process (0 .. num_processes - 1).')
_RESUME = flags.DEFINE_bool(
  'resume',
  True,
  'Continue the run (each run of a sweep) of the same identity in workdir where it stopped; '
  '--noresume deletes its outputs and starts over.',
)
flags.register_validator('num_processes', lambda n: n >= 1, 'must be an integer >= 1')


@flags.multi_flags_validator(['num_processes', 'process_id', 'coordinator'])
def _check_process_flags(f) -> bool:
  """The multi-process flags, checked by absl before JAX's runtime sees them."""
  n, i, address = f['num_processes'], f['process_id'], f['coordinator']
  host, _, port = address.rpartition(':')
  if not 0 <= i < n:
    why = f'--process_id={i} is invalid: must be in [0, {n - 1}] (--num_processes={n})'
  elif address == '' and n > 1 and not os.environ.get('JAX_COORDINATOR_ADDRESS'):
    why = (
      f"--coordinator='' is invalid with --num_processes={n}: give HOST:PORT of process 0 "
      "(or 'auto' under SLURM and the like, or set $JAX_COORDINATOR_ADDRESS)"
    )
  elif address not in ('', 'auto') and not (host and port.isdigit() and 1 <= int(port) <= 65535):
    why = (
      f'--coordinator={address!r} is invalid: must be HOST:PORT with a port in [1, 65535], '
      "'auto' or ''"
    )
  else:
    return True
  raise flags.ValidationError(why)


def _start_processes() -> None:
  """``jax.distributed.initialize`` when asked to (before any JAX computation)."""
  if _COORDINATOR.value == '' and _NUM_PROCESSES.value == 1:
    return
  import jax

  jax.config.update('jax_cpu_collectives_implementation', 'gloo')  # CPU hosts; GPUs: NCCL
  given = {
    'coordinator_address': _COORDINATOR.value or None,
    'num_processes': _NUM_PROCESSES.value,
    'process_id': _PROCESS_ID.value,
  }
  try:
    jax.distributed.initialize(**({} if _COORDINATOR.value == 'auto' else given))
  except (ValueError, RuntimeError) as e:  # no cluster detected, coordinator unreachable
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise UserError(f'jax.distributed.initialize failed: {first}') from None


def main(argv):
  del argv
  config = cli.finish_config(_CONFIG.value)
  _start_processes()
  cache.use_compilation_cache(_WORKDIR.value)  # a rerun loads its programs, no compile
  try:
    if 'sweep' in config and len(config.sweep):  # a grid declared in the config
      import jax

      from afl_jax.pipeline import sweep

      if jax.process_count() > 1:
        raise UserError(
          'config.sweep runs in one process (its outputs are not yet guarded for several); '
          'run the grid points as separate multi-process runs or drop --num_processes'
        )
      out = sweep.train_sweep(config, _WORKDIR.value, resume=_RESUME.value)
      diverged, line = sweep.outcome(out)
      if diverged:  # the last line, and exit status 1: not every run completed
        sys.exit(f'stopped: {line} (see {_WORKDIR.value}/summary.json)')
    else:
      loop.train_and_evaluate(config, _WORKDIR.value, resume=_RESUME.value)
  except loop.NonFiniteError as e:
    sys.exit(f'stopped: {e} (metrics so far in {_WORKDIR.value}/metrics.jsonl)')


if __name__ == '__main__':
  cli.run(main)
