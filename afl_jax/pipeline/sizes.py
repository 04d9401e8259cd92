"""Sizes checked before anything is allocated or compiled (docs/reliability.md)."""

from __future__ import annotations

import os
import sys
from typing import Any

import jax
import numpy as np
from ml_collections.config_flags import config_path

from afl_jax import schedules
from afl_jax.core import memory
from afl_jax.core.memory import format_bytes
from afl_jax.errors import ConfigError
from afl_jax.schedules import schedule as schedule_lib

SLOT_BYTES, STEP_BYTES = 4 + 4 + 4 + 1, 8  # ids, start, K (int32), mask; wall clock per step
# Peak host bytes per arrival while a builder runs (tracemalloc: list builders ~142, array
# builders ~50), per client and per synthetic client (~453 samples of 61 float64 values).
BUILDER_BYTES_PER_ARRIVAL, ARRAY_BUILDER_BYTES_PER_ARRIVAL = 160, 64
CLIENT_BYTES, SYNTHETIC_BYTES_PER_CLIENT = 128, 453 * 61 * 8
MAX_SLOTS = schedule_lib.MAX_SLOTS  # 2e7 (minutes of building), a schedule file's limit too
HOST_FRACTION = 0.5  # of the available host memory, for the host-side arrays


def slots_per_step(config: Any) -> tuple[int, str]:
  """(M, the config field that sets it) for ``config.schedule.kind``."""
  slots = schedules.registry.slots(config.schedule.kind)
  if slots is None:  # every client may report at once
    return int(config.num_clients), 'num_clients'
  if isinstance(slots, int):
    return slots, 'schedule.kind'
  return int(config.schedule[slots]), f'schedule.{slots}'


def estimate(config: Any) -> dict[str, int]:
  """Host bytes by component from the config alone, ``total`` and ``slots``."""
  t, n = int(config.num_rounds), int(config.num_clients)
  slots = t * slots_per_step(config)[0]
  arrays = schedules.SCHEDULES.meta(config.schedule.kind).get('array_builder', False)
  per_arrival = ARRAY_BUILDER_BYTES_PER_ARRIVAL if arrays else BUILDER_BYTES_PER_ARRIVAL
  report = {'schedule_arrays': slots * SLOT_BYTES + t * STEP_BYTES}
  report |= {'schedule_builder': slots * per_arrival, 'client_tables': n * CLIENT_BYTES}
  if config.dataset == 'synthetic':
    report['generated_data'] = n * SYNTHETIC_BYTES_PER_CLIENT
  return report | {'total': sum(report.values()), 'slots': slots}


def host_limit() -> int | None:
  """Bytes the host-side arrays may take: HOST_FRACTION of the available host memory."""
  available = memory.host_bytes('available')
  return None if available is None else int(HOST_FRACTION * available)


def check(config: Any, *, limit_bytes: int | None = None) -> dict[str, int]:
  """Refuse a config whose host-side arrays are absurd; returns :func:`estimate`'s report."""
  report = estimate(config)
  limit = host_limit() if limit_bytes is None else limit_bytes
  t, n = int(config.num_rounds), int(config.num_clients)
  m, m_field = slots_per_step(config)
  shape = f'T={t:,} server steps x M={m:,} arrival slots = {report["slots"]:,} slots'
  schedule_field = (
    ('num_rounds', t) if t >= m else (m_field, config_path.get_value(m_field, config))
  )
  client_part = report['client_tables'] + report.get('generated_data', 0)
  schedule_part = report['schedule_arrays'] + report['schedule_builder']
  if report['slots'] > MAX_SLOTS:
    field, value = schedule_field
    arrays = format_bytes(report['schedule_arrays'])
    why = f'the schedule would have {shape} ({arrays}), above the limit of {MAX_SLOTS:,} slots'

  elif limit is not None and report['total'] > limit:
    shown = {k: v for k, v in report.items() if k not in ('total', 'slots')}
    parts = ', '.join(f'{k.replace("_", " ")} {format_bytes(v)}' for k, v in shown.items())
    field, value = ('num_clients', n) if client_part >= schedule_part else schedule_field
    why = f'the host-side arrays need about {format_bytes(report["total"])} ({parts}; {shape})'
    why += f' but the limit is {format_bytes(limit)} ({HOST_FRACTION:.0%} of the available)'

  else:
    return report
  raise ConfigError.invalid(field, value, f'{why}; lower {field}.')


# The config field that sets each component of the engine's memory report ('slots': M's).
MEMORY_FIELDS = dict(
  per_client_state='num_clients', client_data='num_clients', ring_buffer='schedule.kind',
  server_state='model', stacked_messages='slots', step_working_set='client_block_size',
  batch_activations='batch_size',
)  # fmt: skip


def memory_fields(config: Any) -> dict[str, tuple[str, Any]]:
  fields = {k: slots_per_step(config)[1] if f == 'slots' else f for k, f in MEMORY_FIELDS.items()}
  return {k: (f, config_path.get_value(f, config)) for k, f in fields.items()}


def check_memory(report: dict[str, int], limit: int | None, fields: dict) -> None:
  """:func:`memory.check`, naming the field that sets the largest component."""
  try:
    memory.check(report, limit)
  except memory.InsufficientMemoryError as e:
    parts = {k: v for k, v in report.items() if k != 'total'}
    largest = max(parts, key=parts.get) if parts else 'per_client_state'
    field, value = fields.get(largest, fields['per_client_state'])
    raise ConfigError.invalid(field, value, str(e)) from None


ASSUMED_FLOPS = {'cpu': 1e10, 'other': 1e14}  # client-training FLOP/s of the time estimate
WARN_HOURS, MAX_HOURS, MAX_HOURS_ENV = 0.25, 24.0, 'AFL_JAX_MAX_HOURS'  # warn, refuse (h)
LOSS_BYTES = 4  # each trained client's float32 loss per local step, kept until its loop ends
# The fields that multiply the work, with the default they are compared against.
WORK_FIELDS = {'batch_size': 32, 'local_steps': 10, 'local_epochs': 1, 'num_rounds': 200}
_warned: set[str] = set()


def _max_hours() -> float:
  text = os.environ.get(MAX_HOURS_ENV, '').strip()
  try:
    hours = float(text) if text else MAX_HOURS
  except ValueError:
    hours = -1.0
  if not hours > 0:  # also NaN
    raise ConfigError(f'${MAX_HOURS_ENV}={text!r} is invalid: must be a number of hours > 0')
  return hours


def work(config: Any, sim: Any, params0: Any) -> dict[str, Any]:
  """A built run's client training: steps of its longest run, FLOP (6 x params x batch per
  client step), seconds at ASSUMED_FLOPS, clients trained together and their bytes."""
  params = sum(int(np.size(x)) for x in jax.tree.leaves(params0))
  steps = int(max(sim.useful_steps))
  per_step = 6.0 * params * int(config['batch_size'])
  flops = per_step * steps
  backend = jax.default_backend()
  per_client = sim.client_bytes(params0) + LOSS_BYTES * int(sim.max_steps)
  return {
    'client_steps': steps,
    'flops': flops,
    'total_flops': per_step * sum(sim.useful_steps),
    'seconds': flops / ASSUMED_FLOPS['cpu' if backend == 'cpu' else 'other'],
    'backend': backend,
    'clients_per_step': sim.block_size,
    'step_bytes': sim.block_size * per_client,
    'params': params,
  }


def check_work(
  config: Any, sim: Any, params0: Any, *, limit_bytes: int | None = None, log: Any = None
) -> dict[str, Any]:
  """Refuse a built run whose local loop cannot fit in memory or whose training exceeds
  ``$AFL_JAX_MAX_HOURS`` (naming the field most out of scale); warn once above WARN_HOURS."""
  report = work(config, sim, params0)
  limit = memory.available_bytes() if limit_bytes is None else limit_bytes
  batch = int(config['batch_size'])
  if limit is not None and report['step_bytes'] > memory.SAFETY * limit:
    k, blocks = int(sim.max_steps), report['clients_per_step']
    if blocks * LOSS_BYTES * k * 2 > report['step_bytes']:
      name = 'local_epochs' if int(config['local_epochs']) > 0 else 'local_steps'
      what = f'{LOSS_BYTES} bytes per local step (K up to {k:,})'
    else:
      name, what = 'batch_size', f'its batch of {batch:,} and the activations'
    why = (
      f'the local loop of {blocks:,} clients trained together holds about '
      f'{format_bytes(report["step_bytes"])} ({what}) but {format_bytes(limit)} is available; '
      f'lower {name} or client_block_size.'
    )
    raise ConfigError.invalid(name, config[name], why)
  hours = report['seconds'] / 3600
  fields = dict(WORK_FIELDS)  # the one most above its reference (local_steps: when it sets K)
  fields.pop('local_steps' if int(config['local_epochs']) > 0 else 'local_epochs')
  field = max(fields, key=lambda f: float(config[f]) / fields[f])
  rate = ASSUMED_FLOPS['cpu' if report['backend'] == 'cpu' else 'other']
  what = (
    f'{report["client_steps"]:,} client steps x batch {batch:,} = {report["flops"]:.2g} FLOP '
    f'of client training, about {hours:,.1f} h at an assumed {rate:.0e} FLOP/s on '
    f'{report["backend"]}'
  )
  max_hours = _max_hours()
  if hours > max_hours:
    why = f'{what}, above the limit of {max_hours:g} h (${MAX_HOURS_ENV}); lower {field}.'
    raise ConfigError.invalid(field, config[field], why)
  line = f'warning: config.{field}={config[field]!r}: {what}; scripts/estimate.py measures it here'
  if hours > WARN_HOURS and line not in _warned:
    _warned.add(line)
    (log or (lambda s: print(s, file=sys.stderr)))(line)
  return report
