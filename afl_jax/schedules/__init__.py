"""Delay models computed up front as ``[T, M]`` arrays (docs/architecture.md): the builders, the
``SCHEDULES`` registry of a config's ``schedule.kind`` and the job-duration ``DISTRIBUTIONS``."""

from afl_jax.schedules.builders import (
  fedbuff,
  fully_async,
  random_staleness,
  synchronous,
  waiting_windows,
)
from afl_jax.schedules.durations import CLIENT_SPEEDS, DISTRIBUTIONS, Durations, speed_factors
from afl_jax.schedules.registry import SCHEDULES, ScheduleContext
from afl_jax.schedules.schedule import Schedule, ScheduleError, from_arrays, load

__all__ = [
  'CLIENT_SPEEDS',
  'DISTRIBUTIONS',
  'SCHEDULES',
  'Durations',
  'Schedule',
  'ScheduleContext',
  'ScheduleError',
  'fedbuff',
  'from_arrays',
  'fully_async',
  'load',
  'random_staleness',
  'speed_factors',
  'synchronous',
  'waiting_windows',
]
