"""Checks of hyperparameter values, one place for every rule and factory.

Every factory validates its numeric hyperparameters with these helpers and raises
``ValueError`` naming the argument, the value and the allowed range. A sweep
(many runs in one compiled program) passes numeric hyperparameters as traced
arrays: it validates each replica's concrete values on the host first, then calls
the same factory inside the trace, where a traced value passes through unchecked.
Callables (optax schedules) pass through too.
"""

from __future__ import annotations

import math
from typing import Any

import jax


def is_traced(value: Any) -> bool:
  """True for a value that is only known inside a trace (a sweep's hyperparameter)."""
  return isinstance(value, jax.core.Tracer)


def _skip(value: Any) -> bool:
  return callable(value) or is_traced(value)


def number(name: str, value: Any) -> float:
  """``value`` as a finite float; booleans and non-numbers are rejected."""
  if isinstance(value, bool):
    raise ValueError(f'{name} must be a number; got the boolean {value!r}.')
  try:
    out = float(value)
  except (TypeError, ValueError):
    raise ValueError(f'{name} must be a number; got {value!r}.') from None
  if not math.isfinite(out):
    raise ValueError(f'{name} must be finite; got {value!r}.')
  return out


def positive(name: str, value: Any) -> None:
  """``value > 0`` (schedules and traced values pass)."""
  if not _skip(value) and not number(name, value) > 0:
    raise ValueError(f'{name} must be > 0; got {value!r}.')


def non_negative(name: str, value: Any) -> None:
  """``value >= 0`` (schedules and traced values pass)."""
  if not _skip(value) and not number(name, value) >= 0:
    raise ValueError(f'{name} must be >= 0; got {value!r}.')


def in_range(
  name: str, value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> None:
  """``low <= value <= high`` (open ends with ``low_open`` / ``high_open``)."""
  if _skip(value):
    return
  v = number(name, value)
  ok_low = v > low if low_open else v >= low
  ok_high = v < high if high_open else v <= high
  if not (ok_low and ok_high):
    interval = f'{"(" if low_open else "["}{low}, {high}{")" if high_open else "]"}'
    raise ValueError(f'{name} must be in {interval}; got {value!r}.')


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
  """An integer ``>= minimum`` (structural: never traced)."""
  if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
    raise ValueError(f'{name} must be an integer >= {minimum}; got {value!r}.')
  if value < minimum:
    raise ValueError(f'{name} must be an integer >= {minimum}; got {value!r}.')
  return int(value)


def one_of(name: str, value: Any, allowed: tuple) -> None:
  """``value in allowed`` (structural)."""
  if value not in allowed:
    raise ValueError(f'{name} must be one of {allowed}; got {value!r}.')
