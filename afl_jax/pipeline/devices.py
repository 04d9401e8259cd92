"""The CPU device split, chosen by scripts (importing afl_jax changes no process setting).

On CPU, XLA exposes one device that keeps ~1.6 of 2 cores busy on these small
products; one host device per core lets the engine shard clients over all cores
(1.7x faster on the benchmark task, docs/performance.md). Scripts call
:func:`set_cpu_devices` first thing, before JAX starts its backend.
"""

from __future__ import annotations

import os

ENV = 'AFL_JAX_CPU_DEVICES'
_FLAG = 'xla_force_host_platform_device_count'


def set_cpu_devices(count: int | None = None) -> None:
  """Ask XLA for ``count`` host CPU devices (default: $AFL_JAX_CPU_DEVICES, else one per core).

  Only effective before JAX initializes its backend; a device count already set in
  ``XLA_FLAGS`` is left alone.
  """
  flags = os.environ.get('XLA_FLAGS', '')
  if _FLAG in flags:
    return
  n = count or os.environ.get(ENV) or os.cpu_count() or 1
  os.environ['XLA_FLAGS'] = f'{flags} --{_FLAG}={int(n)}'.strip()
