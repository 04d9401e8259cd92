"""A config's ``schedule.kind``: ``kind(ctx, [durations], **settings) -> Schedule``; ``slots`` and
``array_builder`` are what the size checks read (docs/extending.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from afl_jax import checks
from afl_jax.registry import Registry
from afl_jax.schedules import builders, fedecho_table1, traces
from afl_jax.schedules.durations import CLIENT_SPEEDS, DISTRIBUTIONS, Durations, speed_factors
from afl_jax.schedules.schedule import Schedule


class ScheduleContext(NamedTuple):
  """What a delay model may read of the run: N, T, each client's K_i and examples, the seed."""

  num_clients: int
  num_steps: int
  local_steps: np.ndarray
  client_sizes: np.ndarray
  seed: int


# Job durations: settings of every model that draws them.
DURATIONS = Registry('job durations', section='schedule', supplied=('ctx',))


def _durations_problem(durations: str, durations_params: Any) -> tuple | None:
  """``durations_params`` (a mapping; None: the defaults) bound to distribution ``durations``."""
  if durations not in DISTRIBUTIONS:
    return DISTRIBUTIONS.refusal(durations, {})
  params = {} if durations_params is None else durations_params
  if isinstance(params, str) or not callable(getattr(params, 'items', None)):
    names = list(DISTRIBUTIONS.settings(durations))  # the example is this distribution's
    example = DISTRIBUTIONS.defaults(durations) or dict.fromkeys(names, 1.0)
    why = (
      f'must be a mapping of the parameters {names} of distribution {durations!r}, e.g. {example}'
    )
    return 'schedule.durations_params', params, why
  return DISTRIBUTIONS.refusal(durations, dict(params.items()))


@DURATIONS.register(
  'draw',
  client_speed=checks.choice(CLIENT_SPEEDS),
  client_speed_sigma=checks.real(0.0, low_open=True),
  durations_params=checks.ANY,  # a mapping, bound to the distribution by the rule below
  rules=(checks.Rule('durations_params', _durations_problem),),
)
def job_durations(
  ctx: ScheduleContext,
  durations: str = 'uniform',
  durations_params: Mapping[str, float] | None = None,
  client_speed: str = 'none',
  client_speed_sigma: float = 0.5,
) -> Durations:
  speed = speed_factors(client_speed, ctx.local_steps, sigma=client_speed_sigma, seed=ctx.seed)
  return Durations(durations, dict(durations_params or {}), speed)


SCHEDULES = Registry(
  'schedule',
  section='schedule',
  name_field='schedule.kind',
  supplied=('ctx',),
  shared=builders.SETTINGS,
  parts={'durations': job_durations},
)


def draws_durations(kind: str) -> bool:
  return 'durations' in SCHEDULES.settings(kind)


def slots(kind: str) -> str | int | None:
  """What sets M for ``kind``: a setting, a fixed int, or None (up to N)."""
  return SCHEDULES.meta(kind).get('slots')


def _clock(num_clients: int, concurrency: int, buffer_size: int) -> tuple | None:
  problem = builders.clock_problem(num_clients, concurrency, buffer_size)
  return None if problem is None else ('num_clients', num_clients, problem)


CLOCK = (checks.Rule('num_clients', _clock),)


@SCHEDULES.register('synchronous', slots='clients_per_step', array_builder=True)
def synchronous(ctx: ScheduleContext, durations: Durations, clients_per_step: int = 10) -> Schedule:
  return builders.synchronous(
    ctx.num_clients, clients_per_step, ctx.num_steps, **_common(ctx, durations)
  )


@SCHEDULES.register('fedbuff', slots='buffer_size', rules=CLOCK)
def fedbuff(
  ctx: ScheduleContext, durations: Durations, concurrency: int = 20, buffer_size: int = 10
) -> Schedule:
  return builders.fedbuff(
    ctx.num_clients, concurrency, buffer_size, ctx.num_steps, **_common(ctx, durations)
  )


@SCHEDULES.register('fully_async', slots=1)
def fully_async(ctx: ScheduleContext, durations: Durations, concurrency: int = 20) -> Schedule:
  return builders.fully_async(
    ctx.num_clients, concurrency, ctx.num_steps, **_common(ctx, durations)
  )


@SCHEDULES.register('waiting_windows', wait_seconds=checks.real(0.0))
def waiting_windows(
  ctx: ScheduleContext, durations: Durations, wait_seconds: float = 0.0
) -> Schedule:
  """The server steps every ``wait_seconds`` of simulated time (0 = synchronous)."""
  return builders.waiting_windows(
    ctx.num_clients, ctx.num_steps, window=wait_seconds or None, **_common(ctx, durations)
  )


@SCHEDULES.register(
  'random_staleness',
  slots='clients_per_step',
  array_builder=True,
  local_steps_multipliers=checks.string(
    pattern=r'^\s*([1-9]\d*\s*(,\s*[1-9]\d*\s*)*)?$', note=" ('' or comma-separated integers >= 1)"
  ),
)
def random_staleness(
  ctx: ScheduleContext,
  clients_per_step: int = 10,
  window: int = 5,
  local_steps_multipliers: str = '',
) -> Schedule:
  """FedGM App. H.1; ``local_steps_multipliers`` e.g. '1,2,3,4,5,6' ('' = none)."""
  multipliers = [int(v) for v in local_steps_multipliers.split(',') if v.strip()] or None
  given = {'window': window, 'local_steps_multipliers': multipliers, **_common(ctx)}
  return builders.random_staleness(ctx.num_clients, clients_per_step, ctx.num_steps, **given)


def fedecho_table1_kind(
  ctx: ScheduleContext,
  concurrency: int = 20,
  buffer_size: int = 10,
  straggler_gamma: float = 1.0,
  delay: str = 'large',
) -> Schedule:
  """FedEcho's Table 1 ``delay`` on FedBuff's clock (gamma = straggler_gamma)."""
  return fedecho_table1.schedule(
    ctx.client_sizes, concurrency, buffer_size, ctx.num_steps, delay=delay,
    gamma=float(straggler_gamma), **_common(ctx),
  )  # fmt: skip


for _delay in ('large', 'mild'):
  SCHEDULES.register(
    f'fedecho_{_delay}',
    fedecho_table1_kind,
    fixed={'delay': _delay},
    slots='buffer_size',
    rules=CLOCK,
    straggler_gamma=builders.BUILDERS.specs('fedecho')['gamma'],  # declared with it
  )


# B = 0 (every job waited for) is the builder's; the config kind takes a bound of 1 or more.
@SCHEDULES.register('port', slots='buffer_size', rules=CLOCK, staleness_bound=checks.integer(1))
def port(
  ctx: ScheduleContext,
  durations: Durations,
  concurrency: int = 20,
  staleness_bound: int = 10,
  urgent: bool = False,
  buffer_size: int = 10,
) -> Schedule:
  bound = {'staleness_bound': staleness_bound, 'urgent': urgent, **_common(ctx, durations)}
  return builders.fedbuff(ctx.num_clients, concurrency, buffer_size, ctx.num_steps, **bound)


# concurrency bounds only a speeds trace's clock (checked there); a jobs trace ignores it.
@SCHEDULES.register(
  'trace', slots='buffer_size', concurrency=checks.integer(1), buffer_size=checks.integer(1)
)
def trace(
  ctx: ScheduleContext,
  durations: Durations,
  trace: str = '',
  concurrency: int = 20,
  buffer_size: int = 10,
) -> Schedule:
  """A trace file: per-client speeds, recorded jobs or a recorded schedule (docs/extending.md)."""
  return traces.schedule(ctx, durations, trace, concurrency, buffer_size)


def _common(ctx: ScheduleContext, durations: Durations | None = None) -> dict[str, Any]:
  out = {'local_steps': ctx.local_steps, 'seed': ctx.seed}
  return out if durations is None else out | {'durations': durations}
