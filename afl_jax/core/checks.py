"""The range vocabulary of the rules: :mod:`afl_jax.ranges` (``checks.real(...)``, ...) and
the check of a rule's call (:func:`~afl_jax.registry.validated`, :data:`COMMON`)."""

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
)
from afl_jax.registry import COMMON, validated

__all__ = [
  'COMMON',
  'NON_NEGATIVE',
  'POSITIVE',
  'SPEC_KINDS',
  'Spec',
  'boolean',
  'choice',
  'inferred',
  'integer',
  'integers',
  'is_traced',
  'real',
  'reals',
  'string',
  'validated',
]
