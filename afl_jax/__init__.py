"""afl_jax: asynchronous federated learning in JAX.

Pure, jitted update rules (``afl_jax.clients``, ``afl_jax.servers``), delay
schedules computed up front (``afl_jax.schedules``), one scan/vmap engine
(``afl_jax.core``) and a registry of algorithms (``afl_jax.algorithms``); the
experiment pipeline (config -> ``build`` -> train loop) is ``afl_jax.pipeline``.

The public subpackages are attributes of the package: ``afl_jax.data``,
``afl_jax.models``, ``afl_jax.schedules``, ``afl_jax.compression``,
``afl_jax.algorithms``, ``afl_jax.pipeline``, ``afl_jax.reproduction`` and
``afl_jax.results`` (tables over seeds); the ones that pull in flax, pandas or
matplotlib are imported on first use. Importing afl_jax changes
no process-wide setting; scripts choose the CPU device split with
``afl_jax.pipeline.devices.set_cpu_devices()``.
"""

import importlib

from afl_jax import algorithms, clients, compression, core, problems, schedules, servers
from afl_jax.api import Result, simulate, sweep
from afl_jax.core.simulator import Simulator
from afl_jax.core.types import (
  Algorithm,
  Arrivals,
  ClientRule,
  LocalTask,
  ServerRule,
)

__all__ = [
  'Algorithm',
  'Arrivals',
  'ClientRule',
  'LocalTask',
  'Result',
  'ServerRule',
  'Simulator',
  'algorithms',
  'clients',
  'compression',
  'core',
  'data',
  'models',
  'pipeline',
  'problems',
  'reproduction',
  'results',
  'schedules',
  'servers',
  'simulate',
  'sweep',
]
__version__ = '0.1.0'

# Imported on first access (``afl_jax.data``): they load flax, pandas or matplotlib.
_LAZY = ('data', 'models', 'pipeline', 'reproduction', 'results')


def __getattr__(name: str):
  if name in _LAZY:
    return importlib.import_module(f'afl_jax.{name}')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(_LAZY))
