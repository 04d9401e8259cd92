"""The experiment pipeline: ``build_run(config) -> Run`` (validated once), then a loop that
runs, evaluates, checkpoints and writes (docs/architecture.md, "The path of a run")::

  run = afl_jax.pipeline.build_run(config)
  summary = afl_jax.pipeline.train_and_evaluate(config, workdir)"""

from afl_jax.pipeline.build import Run, build_run
from afl_jax.pipeline.loop import NonFiniteError, train_and_evaluate

__all__ = ['NonFiniteError', 'Run', 'build_run', 'train_and_evaluate']
