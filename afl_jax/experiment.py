"""The train loop now lives in afl_jax/pipeline/loop.py; this name re-exports it."""

from afl_jax.pipeline.build import build, build_schedule
from afl_jax.pipeline.loop import NonFiniteError, train_and_evaluate

__all__ = ['NonFiniteError', 'build', 'build_schedule', 'train_and_evaluate']
