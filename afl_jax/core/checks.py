"""The vocabulary of ranges (:mod:`afl_jax.ranges`, re-exported) and value checks of rules.

:class:`Spec` states what one setting accepts (its type and, for numbers, its range;
a bound may name another setting or run fact, e.g. ``integer(1, 'concurrency')``).
Every component a config names (algorithm, schedule, compressor, dataset, model)
declares the Specs of its settings beside its factory at registration, and
:meth:`afl_jax.registry.Registry.bind` checks them: in a config, in
``afl_jax.algorithms.get`` and in ``afl_jax.sweep`` (every replica). The run's own
fields (seed, sizes, data) are checked with Specs too
(:data:`afl_jax.pipeline.config.FIELDS`).

The functions (:func:`positive`, :func:`in_range`...) check the arguments of the
client and server rules called directly from Python, raising ``ValueError`` naming the
argument. A sweep passes numeric hyperparameters as traced arrays: each replica's
concrete values are checked on the host first, then the same factory is called inside
the trace, where a traced value passes through unchecked. Callables (optax schedules)
pass through too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from afl_jax.ranges import (  # the range vocabulary, re-exported: checks.real(...), ...
  NON_NEGATIVE,
  POSITIVE,
  SPEC_KINDS,
  Spec,
  boolean,
  choice,
  inferred,
  integer,
  integers,
  is_traced,
  real,
  reals,
  string,
)


def _skip(value: Any) -> bool:
  return callable(value) or is_traced(value)


def number(name: str, value: Any) -> float:
  """``value`` as a finite float; booleans, strings and non-numbers are rejected."""
  if isinstance(value, bool):
    raise ValueError(f'{name} must be a number; got the boolean {value!r}.')
  if isinstance(value, str | bytes):
    raise ValueError(f'{name} must be a number; got the string {value!r}.')
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
  whole = isinstance(value, int | float | np.integer | np.floating) and math.isfinite(value)
  if isinstance(value, bool | np.bool_) or not whole or int(value) != value:
    raise ValueError(f'{name} must be an integer >= {minimum}; got {value!r}.')
  if value < minimum:
    raise ValueError(f'{name} must be an integer >= {minimum}; got {value!r}.')
  return int(value)


def one_of(name: str, value: Any, allowed: tuple) -> None:
  """``value in allowed`` (structural)."""
  if value not in allowed:
    raise ValueError(f'{name} must be one of {allowed}; got {value!r}.')


__all__ = [
  'NON_NEGATIVE',
  'POSITIVE',
  'SPEC_KINDS',
  'Spec',
  'boolean',
  'choice',
  'in_range',
  'inferred',
  'integer',
  'integers',
  'is_traced',
  'non_negative',
  'number',
  'one_of',
  'positive',
  'positive_int',
  'real',
  'reals',
  'string',
]
