"""Delay models by name for a config's ``schedule`` section: each ``kind(ctx, [durations],
**settings) -> Schedule`` adapts a builder to the run's :class:`ScheduleContext`; ``slots``,
``min_clients`` and ``array_builder`` in its registration are what the size checks read
(docs/extending.md, "A delay trace from a file")."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from afl_jax import ranges as checks
from afl_jax.errors import ConfigError
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


# A setting shared with the builders takes their range (builders.SETTINGS), declared there once.
SCHEDULES = Registry(
  'schedule',
  section='schedule',
  name_field='schedule.kind',
  supplied=('ctx', 'durations'),
  shared=builders.SETTINGS,
)

# ---- job durations: settings of every model that draws them -----------------------------
DURATIONS = Registry('job durations', section='schedule', supplied=('ctx',))


@DURATIONS.register(
  'draw',
  client_speed=checks.choice(CLIENT_SPEEDS),
  client_speed_sigma=checks.real(0.0, low_open=True),
)
def job_durations(
  ctx: ScheduleContext,
  durations: str = 'uniform',
  durations_params: Mapping[str, float] | None = None,
  client_speed: str = 'none',
  client_speed_sigma: float = 0.5,
) -> Durations:
  """Distribution ``durations`` with ``durations_params``, times the ``client_speed`` factors."""
  speed = speed_factors(client_speed, ctx.local_steps, sigma=client_speed_sigma, seed=ctx.seed)
  return Durations(durations, dict(durations_params or {}), speed)


def durations_params(kind: str, params: Any) -> dict[str, float]:
  """``schedule.durations_params`` (a mapping) bound to distribution ``kind``, defaults filled; the
  old string form is refused with the mapping to write."""
  if kind not in DISTRIBUTIONS:
    DISTRIBUTIONS.bind(kind, {})  # the unknown name, in one line
  if params is None:
    params = {}
  if isinstance(params, str) or not callable(getattr(params, 'items', None)):
    example = as_mapping(params) if isinstance(params, str) else None
    why = (
      f'must be a mapping of the parameters of distribution {kind!r}, e.g. '
      f'{example or DISTRIBUTIONS.defaults("uniform")}'
      + (
        " (the string form 'name=value,...' is no longer read)." if isinstance(params, str) else '.'
      )
    )
    raise ConfigError.invalid('schedule.durations_params', params, why)
  return DISTRIBUTIONS.bind(kind, dict(params.items()))


def as_mapping(text: str) -> dict[str, float] | None:
  """The mapping an old-form string 'low=0,high=20' meant (None: not of that form)."""
  try:
    items = [p.split('=', 1) for p in text.split(',') if p.strip()]
    return {k.strip(): float(v) for k, v in items} or None
  except ValueError:
    return None


def resolve_durations_params(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
  """``params`` with ``kind``'s defaults filled (an unknown name kept for validation to refuse)."""
  return DISTRIBUTIONS.defaults(kind) | dict(params)


# ---- what validation, the size checks and the builder read ------------------------------
def draws_durations(kind: str) -> bool:
  """Whether delay model ``kind`` takes ``durations``."""
  return 'durations' in inspect.signature(SCHEDULES.get(kind)).parameters


def settings(kind: str) -> dict[str, Any]:
  """Every setting of ``kind``'s section with its default (durations' too where it draws them)."""
  own = SCHEDULES.settings(kind)
  return own | DURATIONS.settings('draw') if draws_durations(kind) else own


def params(kind: str) -> tuple[str, ...]:
  return tuple(settings(kind))


def slots(kind: str) -> str | int | None:
  """What sets M for ``kind``: a setting, a fixed int, or None (up to N)."""
  return SCHEDULES.meta(kind).get('slots')


def bind(kind: str, values: Mapping[str, Any], num_clients: int | None = None) -> dict[str, Any]:
  """The settings ``kind`` runs with: ``values`` checked, defaults filled (ConfigError naming the
  field, or ``config.num_clients`` below ``min_clients``)."""
  facts = {} if num_clients is None else {'num_clients': num_clients}
  SCHEDULES.bind(kind, {}, facts=facts)  # the name
  valid = settings(kind)
  for k, v in values.items():
    if k not in valid:
      raise ConfigError.invalid(
        f'schedule.{k}', v, f'schedule {kind!r} takes no setting {k!r}; valid: {sorted(valid)}.'
      )
  own = set(SCHEDULES.settings(kind))
  out = SCHEDULES.bind(kind, {k: v for k, v in values.items() if k in own}, facts=facts)
  if draws_durations(kind):
    rest = {k: v for k, v in values.items() if k not in own}
    out |= DURATIONS.bind('draw', rest)
    out['durations_params'] = durations_params(out['durations'], out['durations_params'])
  least = SCHEDULES.meta(kind).get('min_clients')
  if least is not None and num_clients is not None and num_clients < least[1](out):
    why = f'must be >= {least[0]} = {least[1](out)} (schedule {kind!r}).'
    raise ConfigError.invalid('num_clients', num_clients, why)
  return out


def build(kind: str, values: Mapping[str, Any], ctx: ScheduleContext) -> Schedule:
  """Delay model ``kind`` with the section's ``values`` checked, over the run ``ctx``."""
  return make(kind, bind(kind, values, ctx.num_clients), ctx)


def make(kind: str, bound: Mapping[str, Any], ctx: ScheduleContext) -> Schedule:
  """Delay model ``kind`` with settings already checked, over the run ``ctx``."""
  defaults = {k: d for k, d in settings(kind).items() if d is not inspect.Parameter.empty}
  bound = defaults | dict(bound)
  own = {k: v for k, v in bound.items() if k in SCHEDULES.settings(kind)}
  if draws_durations(kind):
    drawn = {k: v for k, v in bound.items() if k not in own}
    own['durations'] = job_durations(ctx, **drawn)
  return SCHEDULES.get(kind)(ctx, **own)


# ---- the delay models -------------------------------------------------------------------
@SCHEDULES.register('synchronous', slots='clients_per_step', array_builder=True)
def synchronous(ctx: ScheduleContext, durations: Durations, clients_per_step: int = 10) -> Schedule:
  return builders.synchronous(
    ctx.num_clients, clients_per_step, ctx.num_steps, **_common(ctx, durations)
  )


@SCHEDULES.register('fedbuff', slots='buffer_size', min_clients=builders.CLOCK)
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
  return builders.random_staleness(
    ctx.num_clients,
    clients_per_step,
    ctx.num_steps,
    window=window,
    local_steps_multipliers=multipliers,
    **_common(ctx),
  )


def _fedecho(delay: str) -> Callable[..., Schedule]:
  def build(
    ctx: ScheduleContext, concurrency: int = 20, buffer_size: int = 10, straggler_gamma: float = 1.0
  ) -> Schedule:
    return fedecho_table1.schedule(
      ctx.client_sizes, concurrency, buffer_size, ctx.num_steps, delay=delay,
      gamma=float(straggler_gamma), **_common(ctx),
    )  # fmt: skip

  build.__doc__ = f"FedEcho's Table 1 {delay} delays on FedBuff's clock (gamma = straggler_gamma)."
  return build


for _delay in ('large', 'mild'):
  SCHEDULES.register(
    f'fedecho_{_delay}',
    slots='buffer_size',
    min_clients=builders.CLOCK,
    straggler_gamma=fedecho_table1.runtime_categories.specs['gamma'],  # declared with it
  )(_fedecho(_delay))


# B = 0 (every job waited for) is the builder's; the config kind takes a bound of 1 or more.
@SCHEDULES.register(
  'port', slots='buffer_size', min_clients=builders.CLOCK, staleness_bound=checks.integer(1)
)
def port(
  ctx: ScheduleContext,
  durations: Durations,
  concurrency: int = 20,
  staleness_bound: int = 10,
  urgent: bool = False,
  buffer_size: int = 10,
) -> Schedule:
  """Port's staleness-bounded FedBuff clock (docs/algorithms/port.md)."""
  return builders.fedbuff(
    ctx.num_clients,
    concurrency,
    buffer_size,
    ctx.num_steps,
    staleness_bound=staleness_bound,
    urgent=urgent,
    **_common(ctx, durations),
  )


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
