"""The range vocabulary (:mod:`afl_jax.ranges`, re-exported) and the check of a rule's call.

A client or server rule declares the range of each argument once, with
``@checks.validated(alpha=checks.real(0, 1, low_open=True))``; an argument named in
:data:`COMMON` takes its range from there. A direct call (``servers.fedasync(alpha=2)``)
raises one :class:`~afl_jax.errors.ArgumentError` naming the argument; a rule called
inside an algorithm's factory is not checked again (the registry checked the
algorithm's settings, whose ranges include its rules', ``register(..., uses=...)``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from afl_jax.errors import ArgumentError
from afl_jax.ranges import (
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
  validating,
  violation,
)

WEIGHTINGS = ('uniform', 'examples')
NORMALIZERS = ('arrivals', 'clients')

# Arguments that mean the same in every rule and algorithm that takes them.
COMMON: dict[str, Spec] = {
  'client_lr': POSITIVE,  # eta_l (an optax schedule is also accepted)
  'server_lr': POSITIVE,  # eta_g
  'weighting': choice(WEIGHTINGS),  # afl_jax.servers.weighting
  'normalizer': choice(NORMALIZERS),  # the mean over |S_t| or over n (AsynFL eq. 5)
  'mu': NON_NEGATIVE,  # the proximal coefficient
  'beta1': real(0.0, 1.0, high_open=True),  # first-moment decay
  'beta2': real(0.0, 1.0, high_open=True),  # second-moment decay
  'epsilon': POSITIVE,
  'num_clients': integer(1),
}


def validated(**specs: Spec | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
  """Decorator: the rule checks its arguments against ``specs`` (None: unchecked), else
  :data:`COMMON`, else the type of the default, when called; the result's ``specs`` are
  the declared and common ranges (what an algorithm built on it inherits)."""

  def deco(f):
    defaults = {k: p.default for k, p in inspect.signature(f).parameters.items()}
    stray = sorted(set(specs) - set(defaults))
    if stray:
      raise ValueError(f'{f.__name__}: ranges {stray} are not arguments.')
    table = {k: specs[k] if k in specs else COMMON.get(k) for k in defaults}
    where = f'{f.__module__.split(".")[1]}.{f.__name__}'

    def check(args):
      known = {k: d for k, d in defaults.items() if d is not inspect.Parameter.empty} | args
      for k, value in args.items():
        spec = table[k] if k in specs or table.get(k) else inferred(defaults.get(k))
        problem = violation(spec, value, defaults.get(k), known)
        if problem is not None:
          raise ArgumentError(f'{k}={value!r} is invalid: {problem} ({where}).')

    out = validating(f, check)
    out.specs = {k: s for k, s in table.items() if s is not None}
    return out

  return deco


def require(name: str, value: Any, spec: Spec) -> None:
  """Raises ArgumentError naming ``name`` unless ``spec`` allows ``value``."""
  problem = violation(spec, value, 0, {})
  if problem is not None:
    raise ArgumentError(f'{name}={value!r} is invalid: {problem}.')


__all__ = [
  'COMMON',
  'NON_NEGATIVE',
  'NORMALIZERS',
  'POSITIVE',
  'SPEC_KINDS',
  'WEIGHTINGS',
  'Spec',
  'boolean',
  'choice',
  'inferred',
  'integer',
  'integers',
  'is_traced',
  'real',
  'reals',
  'require',
  'string',
  'validated',
]
