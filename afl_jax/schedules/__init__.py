"""Delay models computed up front as arrays (see :mod:`afl_jax.schedules.schedule`)."""

from afl_jax.schedules.builders import (
  fedbuff,
  fully_async,
  random_staleness,
  synchronous,
  waiting_windows,
)
from afl_jax.schedules.durations import CLIENT_SPEEDS, Durations, speed_factors
from afl_jax.schedules.durations import make as durations
from afl_jax.schedules.schedule import Schedule, ScheduleError, from_arrays, load

__all__ = [
  'CLIENT_SPEEDS',
  'Durations',
  'Schedule',
  'ScheduleError',
  'durations',
  'fedbuff',
  'from_arrays',
  'fully_async',
  'load',
  'random_staleness',
  'speed_factors',
  'synchronous',
  'waiting_windows',
]
