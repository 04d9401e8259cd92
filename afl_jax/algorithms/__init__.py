"""Algorithms by name.

Every module in this package that registers algorithms (``@register('name')``, or
``@register('name', context=(...))`` for factories that take facts about the run
from a :class:`RunInfo`) is imported here, so adding an algorithm family is adding
one file: no list to edit.
"""

import importlib
import pkgutil

from afl_jax.algorithms.registry import (
  RunInfo,
  context,
  get,
  hyperparameters,
  names,
  parameters,
  register,
)

for _module in pkgutil.iter_modules(__path__):
  if _module.name != 'registry':
    importlib.import_module(f'{__name__}.{_module.name}')

__all__ = ['RunInfo', 'context', 'get', 'hyperparameters', 'names', 'parameters', 'register']
