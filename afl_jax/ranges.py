"""Ranges: what one setting of a component accepts (its type and, for numbers, its range).

A :class:`Spec` is declared beside a factory's argument at registration
(:mod:`afl_jax.registry`) and checked by ``Registry.bind``; build one with
:func:`real`, :func:`integer`, :func:`boolean`, :func:`choice`, :func:`string`,
:func:`reals`, :func:`integers`. A bound may name another setting or a run fact
(``integer(1, 'concurrency')``): ``Registry.bind`` fills in its value. Traced values (a
sweep's hyperparameters inside the trace) pass unchecked, and so do callables (optax
schedules) where a number is expected. ``afl_jax.core.checks`` re-exports all of these.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import jax
import numpy as np


def is_traced(value: Any) -> bool:
  """True for a value that is only known inside a trace (a sweep's hyperparameter)."""
  return isinstance(value, jax.core.Tracer)


# ---- declared specs -------------------------------------------------------------------
SPEC_KINDS = ('real', 'integer', 'boolean', 'choice', 'string', 'reals', 'integers')


def _g(x: float | str) -> str:
  return x if isinstance(x, str) else f'{x:g}'


def _interval(low: float, high: float, low_open: bool, high_open: bool) -> str:
  if high == math.inf:
    return '' if low == -math.inf else f'{">" if low_open else ">="} {_g(low)}'
  if low == -math.inf:
    return f'{"<" if high_open else "<="} {_g(high)}'
  return f'in {"(" if low_open else "["}{_g(low)}, {_g(high)}{")" if high_open else "]"}'


def _is_int(value: Any) -> bool:
  return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


@dataclasses.dataclass(frozen=True)
class Spec:
  """The values one hyperparameter accepts; build with :func:`real`, :func:`integer`, ...

  Attributes:
    kind: one of :data:`SPEC_KINDS` ('reals' / 'integers': a non-empty sequence of them).
    low, high, low_open, high_open: the range of a number (of each entry of a sequence);
      a bound given as a name is that setting's value (``Registry.bind`` fills it in).
    finite: a real must be finite (``False``: +inf is allowed, e.g. "no clipping").
    choices: the allowed values of a 'choice'.
    pattern: a 'string' must match this regular expression ('' = any string).
    note: appended to the allowed range in errors, e.g. ``' (inf = no clipping)'``.
  """

  kind: str
  low: float = -math.inf
  high: float = math.inf
  low_open: bool = False
  high_open: bool = False
  finite: bool = True
  choices: tuple = ()
  note: str = ''
  pattern: str = ''

  def __post_init__(self):
    if self.kind not in SPEC_KINDS:
      raise ValueError(f'Spec kind must be one of {SPEC_KINDS}; got {self.kind!r}.')

  @property
  def range(self) -> str:
    """The allowed range, e.g. ``'> 0'``, ``'in [0, 1)'`` ('' for none)."""
    return _interval(self.low, self.high, self.low_open, self.high_open)

  def describe(self) -> str:
    """What the spec accepts, e.g. ``'a finite number > 0'``, ``'an integer >= 1'``."""
    rng = f' {self.range}' if self.range else ''
    number = 'finite number' if self.finite else 'number'
    return {
      'real': f'a {number}{rng}',
      'integer': f'an integer{rng}',
      'boolean': 'a boolean (True or False)',
      'choice': f'one of {self.choices}',
      'string': 'a string',
      'reals': f'a non-empty sequence of finite numbers{rng}',
      'integers': f'a non-empty sequence of integers{rng}',
    }[self.kind] + self.note

  def _in_range(self, x: float) -> bool:
    ok_low = x > self.low if self.low_open else x >= self.low
    ok_high = x < self.high if self.high_open else x <= self.high
    return ok_low and ok_high

  def _real(self, value: Any) -> str | None:
    if isinstance(value, bool | np.bool_ | str | bytes) or np.ndim(value) != 0:
      return f'must be {self.describe()}, not a {type(value).__name__}'
    try:
      x = float(value)
    except (TypeError, ValueError):
      return f'must be {self.describe()}, not a {type(value).__name__}'
    if math.isnan(x) or (self.finite and math.isinf(x)):
      return f'must be {self.describe()}'
    return None if self._in_range(x) else f'must be {self.range}{self.note}'

  def _integer(self, value: Any) -> str | None:
    if not _is_int(value) or not self._in_range(int(value)):
      return f'must be {self.describe()}'
    return None

  def violation(self, value: Any) -> str | None:
    """None when ``value`` is allowed, else what is allowed (``'must be > 0'``).

    Traced values (a sweep's per-replica hyperparameters inside the trace) and, for
    numbers, callables (optax schedules) are not checked.
    """
    if is_traced(value):
      return None
    if self.kind == 'real':
      return None if callable(value) else self._real(value)
    if self.kind == 'integer':
      return self._integer(value)
    if self.kind == 'boolean':
      return None if isinstance(value, bool | np.bool_) else f'must be {self.describe()}'
    if self.kind == 'choice':
      ok = isinstance(value, str | int | float | None) and value in self.choices
      return None if ok else f'must be {self.describe()}'
    if self.kind == 'string':
      ok = isinstance(value, str) and (not self.pattern or re.match(self.pattern, value))
      return None if ok else f'must be {self.describe()}'
    # 'reals' / 'integers': a non-empty list, tuple or 1-D array, every entry checked.
    if isinstance(value, np.ndarray) and value.ndim == 1:
      value = value.tolist()
    if not isinstance(value, list | tuple) or not value:
      return f'must be {self.describe()}'
    one = dataclasses.replace(self, kind=self.kind[:-1], note='')
    for i, v in enumerate(value):
      if one.violation(v) is not None:
        return f'must be {self.describe()}; entry {i} is {v!r}'
    return None


def real(
  low: float = -math.inf,
  high: float = math.inf,
  *,
  low_open: bool = False,
  high_open: bool = False,
  finite: bool = True,
  note: str = '',
) -> Spec:
  """A number (or an optax schedule) in the range; NaN never, inf only with ``finite=False``."""
  return Spec('real', low, high, low_open, high_open, finite, note=note)


def integer(low: float = -math.inf, high: float = math.inf, *, note: str = '') -> Spec:
  """An int in ``[low, high]`` (not a bool, not a float)."""
  return Spec('integer', low, high, note=note)


def boolean() -> Spec:
  """True or False."""
  return Spec('boolean')


def choice(choices: tuple | list, *, note: str = '') -> Spec:
  """One of ``choices``."""
  return Spec('choice', choices=tuple(choices), note=note)


def string(*, pattern: str = '', note: str = '') -> Spec:
  """A string (matching the regular expression ``pattern``, when given)."""
  return Spec('string', pattern=pattern, note=note)


def reals(
  low: float = -math.inf, high: float = math.inf, *, low_open: bool = False, high_open: bool = False
) -> Spec:
  """A non-empty list, tuple or 1-D array of finite numbers, each in the range."""
  return Spec('reals', low, high, low_open, high_open)


def integers(low: float = -math.inf, high: float = math.inf) -> Spec:
  """A non-empty list, tuple or 1-D array of ints, each in ``[low, high]``."""
  return Spec('integers', low, high)


POSITIVE = real(0.0, low_open=True)
NON_NEGATIVE = real(0.0)


def inferred(default: Any) -> Spec | None:
  """The spec implied by a factory's default when none is declared (None: unchecked).

  A float default means a finite number, an int an integer, a bool a boolean and a
  str a string; other defaults (None, tuples) say nothing.
  """
  if isinstance(default, bool):
    return boolean()
  if isinstance(default, float):
    return real()
  if isinstance(default, int):
    return integer()
  if isinstance(default, str):
    return string()
  return None
