"""What a component's settings accept, declared beside its factory: :class:`Spec` (one setting)
and :class:`Rule` (a combination), checked by :class:`afl_jax.registry.Registry`."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

SPEC_KINDS = ('real', 'integer', 'boolean', 'choice', 'string', 'reals', 'integers', 'any')


def is_traced(value: Any) -> bool:
  return isinstance(value, jax.core.Tracer)


def _g(x: float | str) -> str:
  return x if isinstance(x, str) else f'{x:g}'


def _is_int(value: Any) -> bool:
  return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


@dataclasses.dataclass(frozen=True)
class Spec:
  """The values one setting accepts: a number in ``[low, high]`` (``*_open`` ends; ``finite=False``
  admits inf; a traced value or an optax schedule passes), one of ``choices``, a string matching
  ``pattern``, or a non-empty sequence ('reals', 'integers'); ``note`` follows in errors."""

  kind: str
  low: float | str = -math.inf
  high: float | str = math.inf
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
    low, high = self.low, self.high
    if high == math.inf:
      return '' if low == -math.inf else f'{">" if self.low_open else ">="} {_g(low)}'
    if low == -math.inf:
      return f'{"<" if self.high_open else "<="} {_g(high)}'
    left, right = '(' if self.low_open else '[', ')' if self.high_open else ']'
    return f'in {left}{_g(low)}, {_g(high)}{right}'

  def describe(self) -> str:
    rng = f' {self.range}' if self.range else ''
    return {
      'real': f'a {"finite " * self.finite}number{rng}',
      'integer': f'an integer{rng}',
      'boolean': 'a boolean (True or False)',
      'choice': f'one of {self.choices}',
      'string': 'a string',
      'reals': f'a non-empty sequence of finite numbers{rng}',
      'integers': f'a non-empty sequence of integers{rng}',
      'any': 'anything',
    }[self.kind] + self.note

  def _in_range(self, x: float) -> bool:
    ok_low = x > self.low if self.low_open else x >= self.low
    return ok_low and (x < self.high if self.high_open else x <= self.high)

  def violation(self, value: Any) -> str | None:
    """None when ``value`` is allowed, else what must be (``'must be > 0'``)."""
    must = f'must be {self.describe()}'
    if self.kind == 'any' or is_traced(value) or (self.kind == 'real' and callable(value)):
      return None
    if self.kind == 'real':
      try:
        if isinstance(value, bool | np.bool_ | str | bytes) or np.ndim(value) != 0:
          raise TypeError
        x = float(value)
      except (TypeError, ValueError):
        return f'{must}, not a {type(value).__name__}'
      if math.isnan(x) or (self.finite and math.isinf(x)):
        return must
      return None if self._in_range(x) else f'must be {self.range}{self.note}'
    if self.kind in ('reals', 'integers'):
      if isinstance(value, range) or (isinstance(value, np.ndarray) and value.ndim == 1):
        value = list(value)
      if not isinstance(value, list | tuple) or not value:
        return must
      one = dataclasses.replace(self, kind=self.kind[:-1], note='')
      bad = [i for i, v in enumerate(value) if one.violation(v) is not None]
      return f'{must}; entry {bad[0]} is {value[bad[0]]!r}' if bad else None
    ok = {
      'integer': lambda: _is_int(value) and self._in_range(int(value)),
      'boolean': lambda: isinstance(value, bool | np.bool_),
      'choice': lambda: isinstance(value, str | int | float | None) and value in self.choices,
      'string': lambda: isinstance(value, str) and bool(re.match(self.pattern, value)),
    }[self.kind]()
    return None if ok else must


# real(low, high, *, low_open, high_open, finite, note), integer(...) (not a bool), reals and
# integers (a non-empty list, tuple, range or 1-D array of them), boolean(), string(*, pattern)
real, integer, boolean, string, reals, integers = (
  functools.partial(Spec, kind)
  for kind in ('real', 'integer', 'boolean', 'string', 'reals', 'integers')
)


def choice(choices, *, note: str = '') -> Spec:
  return Spec('choice', choices=tuple(choices), note=note)


POSITIVE = real(0.0, low_open=True)
NON_NEGATIVE = real(0.0)
ANY = Spec('any')  # checked by the factory itself (e.g. an int or a per-client array)


def inferred(default: Any) -> Spec | None:
  """The spec a default implies where none is declared (bool, float, int, str; else None)."""
  specs = ((bool, boolean()), (float, real()), (int, integer()), (str, string()))
  return next((spec for kind, spec in specs if isinstance(default, kind)), None)


def violation(spec: Spec | None, value: Any, default: Any, facts: Mapping[str, Any]) -> str | None:
  """:meth:`Spec.violation` (None also for None where ``default`` is None); a bound given by name
  reads that argument's (or run fact's) value in ``facts``."""
  if spec is None or (value is None and default is None):
    return None
  changes, notes = {}, []
  for end in ('low', 'high'):
    ref = getattr(spec, end)
    if isinstance(ref, str):
      known = facts.get(ref)
      if isinstance(known, int | float) and not isinstance(known, bool):
        changes[end] = known
        notes.append(f'{ref}={known}')
      else:
        changes[end] = -math.inf if end == 'low' else math.inf
  if changes:
    note = f' ({", ".join(notes)})' if notes else ''
    spec = dataclasses.replace(spec, **changes, note=spec.note + note)
  return spec.violation(value)


# Settings that mean the same in every rule and algorithm that takes them.
COMMON: dict[str, Spec] = {
  'client_lr': POSITIVE,  # eta_l (an optax schedule is also accepted)
  'server_lr': POSITIVE,  # eta_g
  'weighting': choice(('uniform', 'examples')),  # by examples or uniform over the arrivals
  'normalizer': choice(('arrivals', 'clients')),  # over |S_t| or n (AsynFL eq. 5)
  'mu': NON_NEGATIVE,  # the proximal coefficient
  'beta1': real(0.0, 1.0, high_open=True),  # first-moment decay
  'beta2': real(0.0, 1.0, high_open=True),  # second-moment decay
  'epsilon': POSITIVE,
  'num_clients': integer(1),
}


@dataclasses.dataclass(frozen=True)
class Rule:
  """A combination of settings: ``problem`` takes the values it ``reads`` (settings or run facts;
  default: its parameters' names) as keywords and returns None when they fit, else what must
  change (blamed on ``field``) or a refusal ``(field, value, why)``; checked where every value it
  reads is known and none is traced."""

  field: str
  problem: Callable[..., str | tuple | None]
  reads: tuple[str, ...] = ()

  def __post_init__(self):
    if not self.reads:
      object.__setattr__(self, 'reads', tuple(inspect.signature(self.problem).parameters))
