"""afl_jax: asynchronous federated learning in JAX.

Pure, jitted update rules (``afl_jax.clients``, ``afl_jax.servers``), delay
schedules computed up front (``afl_jax.schedules``), one scan/vmap engine
(``afl_jax.core``) and a registry of algorithms (``afl_jax.algorithms``).
"""

import os as _os

# On CPU, XLA exposes one device that keeps ~1.6 of 2 cores busy on these small products;
# one host device per core lets the engine shard clients over all cores (1.7x faster on
# the benchmark task, docs/performance.md). Only effective before JAX starts its backend;
# opt out with AFL_JAX_CPU_DEVICES=1 or by setting the XLA flag yourself.
if 'xla_force_host_platform_device_count' not in _os.environ.get('XLA_FLAGS', ''):
  _n = _os.environ.get('AFL_JAX_CPU_DEVICES') or str(_os.cpu_count() or 1)
  _os.environ['XLA_FLAGS'] = (
    _os.environ.get('XLA_FLAGS', '') + f' --xla_force_host_platform_device_count={_n}'
  ).strip()

from afl_jax import algorithms, clients, core, problems, schedules, servers  # noqa: E402
from afl_jax.core.engine import Simulator  # noqa: E402
from afl_jax.core.types import (  # noqa: E402
  Algorithm,
  Arrivals,
  ClientRule,
  LocalTask,
  ServerRule,
)
from afl_jax.simulate import Result, simulate  # noqa: E402

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
  'core',
  'problems',
  'schedules',
  'servers',
  'simulate',
]
__version__ = '0.1.0'
