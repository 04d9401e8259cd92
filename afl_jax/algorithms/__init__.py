"""Algorithms by name.

Every module in this package that registers algorithms (``@register('name')``) is
imported here, so adding an algorithm family is adding one file: no list to edit.
"""

import importlib
import pkgutil

from afl_jax.algorithms.registry import get, hyperparameters, names, register

for _module in pkgutil.iter_modules(__path__):
  if _module.name != 'registry':
    importlib.import_module(f'{__name__}.{_module.name}')

__all__ = ['get', 'hyperparameters', 'names', 'register']
