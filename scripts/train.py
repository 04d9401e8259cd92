"""Train one algorithm from a config.

  python scripts/train.py --config=configs/fmnist.py:fedbuff --workdir=runs/fedbuff \
      --config.num_rounds=300 --config.hparams.client_lr=0.02

A config with a ``sweep`` section runs its grid (afl_jax/pipeline/sweep.py). Any
hyperparameter the algorithm takes can be set with ``--config.hparams.NAME=VALUE``
(even when the config file does not name it). Every user error (config, command
line, data, partition, schedule, memory, resume) ends as one line
``error: config.FIELD=VALUE is invalid: ...`` with exit status 1.

Several processes, one run or one sweep (JAX's distributed runtime, docs/distributed.md):
start the same command once per process with ``--num_processes=P --process_id=i
--coordinator=HOST:PORT`` (``--coordinator=auto``: detected from SLURM and the like).
A run's client axis, or a sweep's replica axis, spans every device of every process.
Process 0 writes the metrics, TensorBoard events, plots, summaries and configs (of every
run folder of a sweep); every process writes its checkpoint shards. ``--workdir`` must
be on a shared filesystem.

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

  from afl_jax.pipeline import cli, loop, processes
except KeyboardInterrupt:
  print('interrupted (Ctrl-C) before the run started; nothing was written', file=sys.stderr)
  sys.exit(130)

_CONFIG = cli.define_config_flag('configs/default.py')
_WORKDIR = flags.DEFINE_string('workdir', 'runs/default', 'Output directory.')
_RESUME = flags.DEFINE_bool(
  'resume',
  True,
  'Continue the run (each run of a sweep) of the same identity in workdir where it stopped; '
  '--noresume deletes its outputs and starts over.',
)
processes.define_flags()


def main(argv):
  del argv
  config = _CONFIG.finish()
  processes.start()
  cache.use_compilation_cache(_WORKDIR.value)  # a rerun loads its programs, no compile
  try:
    if 'sweep' in config and len(config.sweep):  # a grid declared in the config
      from afl_jax.pipeline import sweep

      out = sweep.train_sweep(config, _WORKDIR.value, resume=_RESUME.value)
      diverged, line = sweep.outcome(out)
      if diverged:  # the last line, and exit status 1: not every run completed
        sys.exit(f'stopped: {line} (see {_WORKDIR.value}/summary.json)')
    else:
      loop.train_and_evaluate(config, _WORKDIR.value, resume=_RESUME.value)
  except loop.NonFiniteError as e:
    sys.exit(f'stopped: {e} (metrics so far in {_WORKDIR.value}/metrics.jsonl)')


if __name__ == '__main__':
  cli.run(main, config=_CONFIG)
