"""The experiment config now lives in afl_jax/pipeline/config.py; this name re-exports it."""

from afl_jax.errors import ConfigError
from afl_jax.pipeline.config import (
  default,
  default_hparams,
  resolve,
  set_algorithm,
  validate,
)

__all__ = ['ConfigError', 'default', 'default_hparams', 'resolve', 'set_algorithm', 'validate']
