"""Algorithms by name.

Every module in this package that registers algorithms (``@register('name')``, or
``@register('name', context=(...))`` for factories that take facts about the run
from a :class:`RunInfo`) is imported here, so adding an algorithm family is adding
one file: no list to edit. The range of each hyperparameter is declared beside the
factory at registration (``@register('name', alpha=checks.real(0, 1))``) and checked
by ``ALGORITHMS.bind`` (:mod:`afl_jax.registry`, the one check of every component a
config names) before the factory runs; ``register(..., replace=True)``
replaces an algorithm already registered under that name. A family whose algorithms
differ only in fixed arguments registers them all from one table
(:func:`register_family`, one :class:`Variant` each).
"""

import importlib
import pkgutil

from afl_jax.algorithms.registry import (
  ALGORITHMS,
  SHARED_SPECS,
  RunInfo,
  Variant,
  context,
  get,
  hyperparameter_specs,
  hyperparameters,
  names,
  parameters,
  register,
  register_family,
)

for _module in pkgutil.iter_modules(__path__):
  if _module.name != 'registry':
    importlib.import_module(f'{__name__}.{_module.name}')

__all__ = [
  'ALGORITHMS',
  'SHARED_SPECS',
  'RunInfo',
  'Variant',
  'context',
  'get',
  'hyperparameter_specs',
  'hyperparameters',
  'names',
  'parameters',
  'register',
  'register_family',
]
