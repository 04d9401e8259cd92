"""The CPU device split, chosen by scripts before JAX starts its backend (docs/performance.md)."""

from __future__ import annotations

import os
import sys

ENV = 'AFL_JAX_CPU_DEVICES'
_FLAG = 'xla_force_host_platform_device_count'


def env_devices() -> int | None:
  """$AFL_JAX_CPU_DEVICES as a count (None: unset or empty); ValueError when not >= 1."""
  text = os.environ.get(ENV, '').strip()
  if not text:
    return None
  if not text.isdigit() or int(text) < 1:
    raise ValueError(f'${ENV}={os.environ[ENV]!r} is invalid: must be an integer >= 1')
  return int(text)


def set_cpu_devices(count: int | None = None) -> None:
  """Ask XLA for ``count`` host CPU devices (default $AFL_JAX_CPU_DEVICES, else one per core);
  a count already in ``XLA_FLAGS`` is left alone."""
  try:
    n = count or env_devices() or os.cpu_count() or 1
  except ValueError as e:
    sys.exit(f'error: {e}')
  flags = os.environ.get('XLA_FLAGS', '')
  if _FLAG not in flags:
    os.environ['XLA_FLAGS'] = f'{flags} --{_FLAG}={int(n)}'.strip()
  message = platform_error()
  if message:
    sys.exit(f'error: {message}')


def platform_error(argv: list[str] | None = None) -> str | None:
  """Why the platforms $JAX_PLATFORMS asks for cannot start, in one line (None: they start;
  not probed for a multi-process run)."""
  from afl_jax.pipeline.workdir import flag_value

  text, argv = os.environ.get('JAX_PLATFORMS', '').strip(), sys.argv if argv is None else argv
  if (
    not text
    or flag_value(argv, 'coordinator')
    or flag_value(argv, 'num_processes') not in (None, '1')
  ):
    return None
  import jax

  try:
    jax.devices()
  except Exception as e:  # noqa: BLE001 (RuntimeError, or a bare AssertionError for cuda)
    why = ' '.join(str(e).split()).split(' (set JAX_PLATFORMS')[0].rstrip('.')
    why = why or f'JAX found no backend for {text} here (no plugin or no device)'
    return f'$JAX_PLATFORMS={text!r} is invalid: {why}; set JAX_PLATFORMS=cpu or unset it'

  return None


def device_kind() -> str:
  """The first device's kind, e.g. 'cpu' or 'NVIDIA H100 80GB HBM3'."""
  import jax

  return getattr(jax.devices()[0], 'device_kind', jax.default_backend())


def peak_device_bytes() -> int | None:
  """Peak bytes held on the first accelerator so far; None on CPU."""
  import jax

  device = jax.devices()[0]
  stats = device.memory_stats() if device.platform != 'cpu' else None
  return int(stats['peak_bytes_in_use']) if stats and 'peak_bytes_in_use' in stats else None
