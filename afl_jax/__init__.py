"""afl_jax: asynchronous federated learning in JAX. Subpackages that pull in flax, pandas or
matplotlib are imported on first use; importing afl_jax changes no process-wide setting."""

import importlib

from afl_jax import algorithms, clients, compression, core, problems, schedules, servers
from afl_jax.api import Result, simulate, sweep
from afl_jax.core.simulator import Simulator
from afl_jax.core.types import Algorithm, Arrivals, ClientRule, LocalTask, ServerRule

# fmt: off
__all__ = [
  'Algorithm', 'Arrivals', 'ClientRule', 'LocalTask', 'Result', 'ServerRule', 'Simulator',
  'algorithms', 'clients', 'compression', 'core', 'data', 'models', 'pipeline', 'problems',
  'reproduction', 'results', 'schedules', 'servers', 'simulate', 'sweep',
]
# fmt: on
__version__ = '0.1.0'

_LAZY = ('data', 'models', 'pipeline', 'reproduction', 'results')


def __getattr__(name: str):
  if name in _LAZY:
    return importlib.import_module(f'afl_jax.{name}')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(_LAZY))
