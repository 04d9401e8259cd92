"""Algorithms by name, one private file per paper family (client rule, server rule, registration):
``afl_jax.algorithms.<name>(**hparams)`` or ``make(name, facts=RunInfo(...), **hparams)``."""
# ruff: noqa: F401 (re-exports, listed in __all__)

import importlib
import pkgutil

from afl_jax.algorithms._masfl import adamasfl_theory, masfl_theory
from afl_jax.algorithms._shared import ALGORITHMS, CLIENTS, CONTEXT_FIELDS, SERVERS, RunInfo

for _family in pkgutil.iter_modules(__path__):  # each file registers its paper family
  importlib.import_module(f'{__name__}.{_family.name}')

make, names, settings, register = ALGORITHMS.verbs()
globals().update(ALGORITHMS.exports())  # afl_jax.algorithms.<name>: each registered algorithm
__all__ = (
  'ALGORITHMS CLIENTS CONTEXT_FIELDS SERVERS RunInfo adamasfl_theory make masfl_theory names '
  'register settings'
).split() + ALGORITHMS.names()
