"""afl_jax: asynchronous federated learning in JAX.

Pure, jitted update rules (``afl_jax.clients``, ``afl_jax.servers``), delay
schedules computed up front (``afl_jax.schedules``), one scan/vmap engine
(``afl_jax.core``) and a registry of algorithms (``afl_jax.algorithms``); the
experiment pipeline (config -> ``build`` -> train loop) is ``afl_jax.pipeline``.

Importing afl_jax changes no process-wide setting; scripts choose the CPU device
split with ``afl_jax.pipeline.devices.set_cpu_devices()``.
"""

from afl_jax import algorithms, clients, core, problems, schedules, servers
from afl_jax.api import Result, SweepResult, simulate, sweep
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
  'SweepResult',
  'algorithms',
  'clients',
  'core',
  'problems',
  'schedules',
  'servers',
  'simulate',
  'sweep',
]
__version__ = '0.1.0'
