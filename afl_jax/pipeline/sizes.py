"""Sizes checked before anything is allocated or compiled (docs/reliability.md, "Sizes before
allocation"): the host arrays from the config (:func:`check`), and a built run's local
loop and time from its simulator (:func:`check_work`); one ConfigError naming the field."""

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
# builders ~50), per client (ids, sizes, offsets, K, speeds) and per synthetic client
# (mean 50 + e^6 ~ 453 samples of 60 float64 features and a label).
BUILDER_BYTES_PER_ARRIVAL, ARRAY_BUILDER_BYTES_PER_ARRIVAL = 160, 64
CLIENT_BYTES, SYNTHETIC_BYTES_PER_CLIENT = 128, 453 * 61 * 8
# Event-clock builders make ~1e5 slots/s on one core: 2e7 slots is minutes of building.
MAX_SLOTS = schedule_lib.MAX_SLOTS  # 2e7, the limit a schedule file is read against too
HOST_FRACTION = 0.5  # of the available host memory, for the host-side arrays


def slots_per_step(config: Any) -> tuple[int, str]:
  """(M, the config field that sets it) for ``config.schedule.kind``, before building."""
  slots = schedules.registry.slots(config.schedule.kind)
  if slots is None:  # every client may report at once
    return int(config.num_clients), 'num_clients'
  if isinstance(slots, int):
    return slots, 'schedule.kind'
  return int(config.schedule[slots]), f'schedule.{slots}'


def estimate(config: Any) -> dict[str, int]:
  """Host bytes by component from the config alone (``schedule_arrays``,
  ``schedule_builder``, ``client_tables``, ``generated_data``), ``total`` and ``slots``."""
  t = int(config.num_rounds)
  m, _ = slots_per_step(config)
  n = int(config.num_clients)
  slots = t * m
  array_builder = schedules.SCHEDULES.meta(config.schedule.kind).get('array_builder', False)
  per_arrival = ARRAY_BUILDER_BYTES_PER_ARRIVAL if array_builder else BUILDER_BYTES_PER_ARRIVAL
  report = {
    'schedule_arrays': slots * SLOT_BYTES + t * STEP_BYTES,
    'schedule_builder': slots * per_arrival,
    'client_tables': n * CLIENT_BYTES,
  }
  if config.dataset == 'synthetic':
    report['generated_data'] = n * SYNTHETIC_BYTES_PER_CLIENT
  report['total'] = sum(report.values())
  report['slots'] = slots
  return report


def host_limit() -> int | None:
  """Bytes the host-side arrays may take: HOST_FRACTION of the available host memory."""
  available = memory.host_bytes('available')
  return None if available is None else int(HOST_FRACTION * available)


def check(
  config: Any, *, limit_bytes: int | None = None, max_slots: int = MAX_SLOTS
) -> dict[str, int]:
  """Refuse a config whose host-side sizes are absurd (ConfigError naming num_rounds,
  num_clients or the field setting M); returns :func:`estimate`'s report."""
  report = estimate(config)
  limit = host_limit() if limit_bytes is None else limit_bytes
  t, n = int(config.num_rounds), int(config.num_clients)
  m, m_field = slots_per_step(config)
  shape = f'T={t:,} server steps x M={m:,} arrival slots = {report["slots"]:,} slots'
  # The larger of T and M is the one to lower.
  schedule_field = (
    ('num_rounds', t) if t >= m else (m_field, config_path.get_value(m_field, config))
  )
  client_part = report['client_tables'] + report.get('generated_data', 0)
  schedule_part = report['schedule_arrays'] + report['schedule_builder']
  if report['slots'] > max_slots:
    field, value = schedule_field
    why = (
      f'the schedule would have {shape} ({format_bytes(report["schedule_arrays"])} of arrays, '
      f'more to build), above the limit of {max_slots:,} slots'
    )
  elif limit is not None and report['total'] > limit:
    shown = {k: v for k, v in report.items() if k not in ('total', 'slots')}
    parts = ', '.join(f'{k.replace("_", " ")} {format_bytes(v)}' for k, v in shown.items())
    field, value = ('num_clients', n) if client_part >= schedule_part else schedule_field
    why = (
      f'the host-side arrays need about {format_bytes(report["total"])} ({parts}; '
      f'{shape}) but the limit is {format_bytes(limit)} ({HOST_FRACTION:.0%} of the available '
      'host memory)'
    )
  else:
    return report
  raise ConfigError.invalid(field, value, f'{why}; lower {field}.')


# The config field that sets each component of the engine's analytic memory report
# (:func:`afl_jax.core.memory.estimate`); 'slots' is the one that sets M (slots_per_step).
MEMORY_FIELDS = {
  'per_client_state': 'num_clients',
  'client_data': 'num_clients',
  'ring_buffer': 'schedule.kind',
  'server_state': 'model',
  'stacked_messages': 'slots',
  'step_working_set': 'client_block_size',
  'batch_activations': 'batch_size',
}


def memory_fields(config: Any) -> dict[str, tuple[str, Any]]:
  """``(field, value)`` of the config that sets each component of the memory report
  (:data:`MEMORY_FIELDS`; 'slots': the field that sets M), read once, when the run is built."""
  out = {}
  for component, field in MEMORY_FIELDS.items():
    field = slots_per_step(config)[1] if field == 'slots' else field
    out[component] = (field, config_path.get_value(field, config))
  return out


def check_memory(report: dict[str, int], limit: int | None, fields: dict) -> None:
  """:func:`afl_jax.core.memory.check` of ``report``, a ConfigError naming the field that sets
  its largest component (``fields``: :func:`memory_fields`)."""
  try:
    memory.check(report, limit)
  except memory.InsufficientMemoryError as e:
    parts = {k: v for k, v in report.items() if k != 'total'}
    largest = max(parts, key=parts.get) if parts else 'per_client_state'
    field, value = fields.get(largest, fields['per_client_state'])
    raise ConfigError.invalid(field, value, str(e)) from None


# ---- the work of a built run: one step's memory and the run's time, before compute -------
ASSUMED_FLOPS = {'cpu': 1e10, 'other': 1e14}  # client-training FLOP/s of the time estimate
WARN_HOURS, MAX_HOURS, MAX_HOURS_ENV = 0.25, 24.0, 'AFL_JAX_MAX_HOURS'  # warn, refuse (h)
LOSS_BYTES = 4  # each trained client's float32 loss per local step, kept until its loop ends
# The fields that multiply the work, with the default they are compared against.
WORK_FIELDS = {'batch_size': 32, 'local_steps': 10, 'local_epochs': 1, 'num_rounds': 200}
_warned: set[str] = set()


def _max_hours() -> float:
  text = os.environ.get(MAX_HOURS_ENV, '').strip()
  if not text:
    return MAX_HOURS
  try:
    hours = float(text)
  except ValueError:
    hours = -1.0
  if not hours > 0:
    raise ConfigError(f'${MAX_HOURS_ENV}={text!r} is invalid: must be a number of hours > 0')
  return hours


def work(config: Any, sim: Any, params0: Any) -> dict[str, Any]:
  """A built run's client training, asked of its simulator: useful ``client_steps`` of its
  longest run, ``flops`` (6 x params x batch per client step), ``seconds`` at
  ASSUMED_FLOPS, ``clients_per_step`` (the engine's block) and ``step_bytes`` (their batch,
  activations and per-step losses), ``total_flops`` (of all the simulator's runs) and
  ``params`` (scalars of ``params0``, one run's)."""
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
  config: Any,
  sim: Any,
  params0: Any,
  *,
  limit_bytes: int | None = None,
  log: Any = None,
) -> dict[str, Any]:
  """Refuse a built run whose local loop cannot fit in memory (naming batch_size or K's
  field) or whose training cannot end within ``$AFL_JAX_MAX_HOURS`` (naming the field of
  :data:`WORK_FIELDS` most out of scale); warn once above WARN_HOURS."""
  report = work(config, sim, params0)
  limit = memory.available_bytes() if limit_bytes is None else limit_bytes
  refusal = None  # (field, value, why): one refusal, the local loop's before the time's
  if limit is not None and report['step_bytes'] > memory.SAFETY * limit:
    k = int(sim.max_steps)
    trace = report['clients_per_step'] * LOSS_BYTES * k
    if trace * 2 > report['step_bytes']:
      name = 'local_epochs' if int(config['local_epochs']) > 0 else 'local_steps'
      what = f'{LOSS_BYTES} bytes per local step (K up to {k:,})'
    else:
      name, what = 'batch_size', f'its batch of {int(config["batch_size"]):,} and the activations'
    refusal = (
      name,
      config[name],
      f'the local loop of {report["clients_per_step"]:,} clients trained together holds about '
      f'{format_bytes(report["step_bytes"])} ({what}) but the backend reports '
      f'{format_bytes(limit)} available ({memory.SAFETY:.0%} usable); lower {name} (or '
      'set client_block_size to train fewer clients together).',
    )
  hours = report['seconds'] / 3600
  fields = dict(WORK_FIELDS)  # the one most above its reference (local_steps: when it sets K)
  fields.pop('local_steps' if int(config['local_epochs']) > 0 else 'local_epochs')
  field = max(fields, key=lambda f: float(config[f]) / fields[f])
  value = config[field]
  rate = ASSUMED_FLOPS['cpu' if report['backend'] == 'cpu' else 'other']
  what = (
    f'{report["client_steps"]:,} client steps x batch {int(config["batch_size"]):,} = '
    f'{report["flops"]:.2g} FLOP of client training, about {hours:,.1f} h at an assumed '
    f'{rate:.0e} FLOP/s on {report["backend"]}'
  )
  max_hours = _max_hours() if refusal is None else float('inf')
  if hours > max_hours:
    why = f'{what}, above the limit of {max_hours:g} h (${MAX_HOURS_ENV}); lower {field}.'
    refusal = (field, value, why)
  if refusal is not None:
    raise ConfigError.invalid(*refusal)
  if hours > WARN_HOURS:
    line = f'warning: config.{field}={value!r}: {what}; scripts/estimate.py measures it here'
    if line not in _warned:
      _warned.add(line)
      (log or (lambda s: print(s, file=sys.stderr)))(line)
  return report
