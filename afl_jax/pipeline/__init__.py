"""The experiment pipeline: one straight path from a config to results.

``build_run(config) -> Run`` (validated once), then a loop that only runs, evaluates,
checkpoints and writes::

  run = afl_jax.pipeline.build_run(config)
  summary = afl_jax.pipeline.train_and_evaluate(config, workdir)

Modules:

  config      the default config, one validator per section, hyperparameter helpers
  build       build_run(config) -> Run (data, model, schedule, algorithm, problem, evaluator)
  task        the task loss, the federated problem layout and the evaluator
  loop        the train loop (train_and_evaluate)
  record      a run's identity and its record (status, steps, seed), read by every reader
  checkpoint  orbax checkpoints, and the step a run continues from
  metrics_io  metrics.jsonl (strict JSON, torn-line repair) and TensorBoard writers
  sweep       sweeps declared in config.sweep, many runs per compile
  plotting    plots of metrics
  workdir     one writer per workdir (a lock naming its holder), path and disk-write errors
  devices     the CPU device split, chosen by scripts
"""

from afl_jax.pipeline.build import Run, build_run
from afl_jax.pipeline.loop import NonFiniteError, train_and_evaluate

__all__ = ['NonFiniteError', 'Run', 'build_run', 'train_and_evaluate']
