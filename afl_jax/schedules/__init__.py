"""Delay models computed up front as arrays (see :mod:`afl_jax.schedules.schedule`)."""

from afl_jax.schedules.builders import (
    fedbuff,
    fully_async,
    random_staleness,
    synchronous,
    waiting_windows,
)
from afl_jax.schedules.durations import Durations
from afl_jax.schedules.durations import make as durations
from afl_jax.schedules.schedule import Schedule, ScheduleError, from_arrays, load

__all__ = [
    'Durations', 'Schedule', 'ScheduleError', 'durations', 'fedbuff', 'from_arrays',
    'fully_async', 'load', 'random_staleness', 'synchronous', 'waiting_windows',
]
