"""Delay models computed up front as arrays (see :mod:`afl_jax.schedules.schedule`).

Every delay model is reachable by name from ``SCHEDULES``
(:mod:`afl_jax.schedules.registry`), including FedEcho's Table 1
(:mod:`afl_jax.schedules.fedecho_table1`). Job-duration models are
``schedules.durations.make(kind, **params)``, the distributions ``DISTRIBUTIONS``
(:mod:`afl_jax.schedules.durations`).
"""

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
