"""Delay models computed up front as ``[T, M]`` arrays: the ``BUILDERS``, the ``SCHEDULES`` of a
config's ``schedule.kind`` and the job-duration ``DISTRIBUTIONS`` (docs/architecture.md)."""

from afl_jax.schedules.builders import (
  BUILDERS,
  fedbuff,
  fully_async,
  random_staleness,
  synchronous,
  waiting_windows,
)
from afl_jax.schedules.durations import CLIENT_SPEEDS, DISTRIBUTIONS, Durations
from afl_jax.schedules.fedecho_table1 import schedule as fedecho
from afl_jax.schedules.registry import SCHEDULES, ScheduleContext
from afl_jax.schedules.schedule import Schedule, ScheduleError, from_arrays, load

make, names, settings, register = SCHEDULES.verbs()

__all__ = [
  'BUILDERS',
  'CLIENT_SPEEDS',
  'DISTRIBUTIONS',
  'SCHEDULES',
  'Durations',
  'Schedule',
  'ScheduleContext',
  'ScheduleError',
  'fedbuff',
  'fedecho',
  'from_arrays',
  'fully_async',
  'load',
  'make',
  'names',
  'random_staleness',
  'register',
  'settings',
  'synchronous',
  'waiting_windows',
]
