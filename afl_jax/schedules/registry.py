"""Delay models by name: ``SCHEDULES.get(kind)(section, context) -> Schedule``.

A config's ``schedule`` section names a delay model (``kind``) and its parameters;
each factory here reads the fields it needs from the section and receives the run's
facts explicitly in a :class:`ScheduleContext` (number of clients and steps, each
client's local step count and training-set size, the seed). The metadata
``draws_durations`` says whether the model draws job durations from
``section.durations`` (and so whether a per-client speed factor applies).

Each entry also declares the facts that config validation and the size checks read
(:func:`params`, :func:`slots`): ``params``, the section fields the model reads, in
the order they are validated (what each accepts: :data:`PARAMS`); ``slots``, the
field that sets the arrival slots per server step M (a section field, an int for a
fixed M, or None where every one of the N clients may arrive at once);
``min_clients``, a bound on N the model needs beyond its parameters' ranges; and
``array_builder``, whether the model is built with arrays rather than Python lists
of arrivals (its host memory while building).

Kinds: ``synchronous``, ``fedbuff`` (FedBuff's event clock), ``fully_async``,
``random_staleness``, ``waiting_windows`` (afl_jax/schedules/builders.py),
``fedecho_large`` / ``fedecho_mild`` (FedEcho's Table 1 on FedBuff's clock,
afl_jax/schedules/fedecho_table1.py, which needs the client sizes) and ``port``
(Port's staleness-bounded clock, afl_jax/schedules/port_clock.py) and ``trace`` (a
measured trace from the file ``schedule.trace``, afl_jax/schedules/traces.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from afl_jax.registry import Registry
from afl_jax.schedules import builders, fedecho_table1, port_clock, traces
from afl_jax.schedules.durations import Durations, speed_factors
from afl_jax.schedules.durations import make as make_duration_model
from afl_jax.schedules.schedule import Schedule


class ScheduleContext(NamedTuple):
  """What a delay model may need to know about the run.

  Attributes:
    num_clients: N.
    num_steps: T, server steps.
    local_steps: int[N] K_i of each client.
    client_sizes: int[N] training examples of each client.
    seed: the schedule's seed.
  """

  num_clients: int
  num_steps: int
  local_steps: np.ndarray
  client_sizes: np.ndarray
  seed: int


SCHEDULES = Registry('schedule')


class Param(NamedTuple):
  """What one section field accepts.

  Attributes:
    kind: 'integer', 'real' (finite), 'boolean' or 'multipliers' ('' or comma-separated
      integers >= 1).
    low: the least value of a number.
    high: ``high(section, num_clients) -> (bound, note)`` for a bounded number, or None.
    low_open: a real number must exceed ``low`` (not only reach it).
  """

  kind: str
  low: float = 0
  high: Callable[[Any, int], tuple[int, str]] | None = None
  low_open: bool = False


PARAMS: dict[str, Param] = {
  'concurrency': Param('integer', 1, lambda s, n: (n, f' (num_clients={n})')),
  'staleness_bound': Param('integer', 1),
  'urgent': Param('boolean'),
  'buffer_size': Param(
    'integer', 1, lambda s, n: (s.concurrency, f' (concurrency={s.concurrency})')
  ),
  'clients_per_step': Param('integer', 1, lambda s, n: (n, f' (num_clients={n})')),
  'window': Param('integer', 1),
  'local_steps_multipliers': Param('multipliers'),
  'wait_seconds': Param('real', 0.0),
  'straggler_gamma': Param('real', 0.0, low_open=True),
}

# FedBuff's clock (and the kinds built on it): a server step takes `buffer_size`
# arrivals (M); it keeps `concurrency` jobs running and draws a replacement from the
# idle clients while `buffer_size - 1` finished ones wait for the server step.
_CLOCK = {
  'slots': 'buffer_size',
  'min_clients': (
    'concurrency + buffer_size - 1',
    lambda s: s.concurrency + s.buffer_size - 1,
  ),
}


def params(kind: str) -> tuple[str, ...]:
  """The section fields delay model ``kind`` reads (each in :data:`PARAMS`)."""
  return SCHEDULES.meta(kind).get('params', ())


def slots(kind: str) -> str | int | None:
  """What sets M for ``kind``: a section field, a fixed int, or None (up to N)."""
  return SCHEDULES.meta(kind).get('slots')


def parse_params(text: str) -> dict[str, float]:
  """'low=0,high=20' -> {'low': 0.0, 'high': 20.0}."""
  out = {}
  for item in filter(None, (p.strip() for p in text.split(','))):
    if '=' not in item:
      raise ValueError(f'expected name=value, got {item!r}')
    k, v = item.split('=', 1)
    out[k.strip()] = float(v)
  return out


def make_durations(kind: str, params: str, speed: np.ndarray | None = None) -> Durations:
  """A duration model from the config's ``durations`` and ``durations_params`` strings."""
  return make_duration_model(kind, speed=speed, **parse_params(params))


def section_durations(s: Any, ctx: ScheduleContext) -> Durations:
  """The section's job durations, scaled by its per-client speed factors."""
  speed = speed_factors(s.client_speed, ctx.local_steps, sigma=s.client_speed_sigma, seed=ctx.seed)
  return make_durations(s.durations, s.durations_params, speed)


def _kind(kind: str, *, draws_durations: bool, **meta: Any):
  """Register ``build(s, ctx, **common) -> Schedule`` as delay model ``kind``.

  ``common`` is what every builder takes from the run the same way: each client's
  local steps, the seed and, for a model that ``draws_durations``, the section's job
  durations (:func:`section_durations`). ``meta`` as described in the module docstring.
  """

  def deco(build: Callable[..., Schedule]) -> Callable[..., Schedule]:
    def factory(s: Any, ctx: ScheduleContext) -> Schedule:
      common = {'local_steps': ctx.local_steps, 'seed': ctx.seed}
      if draws_durations:
        common['durations'] = section_durations(s, ctx)
      return build(s, ctx, **common)

    factory.__doc__ = build.__doc__
    SCHEDULES.register(kind, factory, draws_durations=draws_durations, **meta)
    return build

  return deco


@_kind(
  'synchronous',
  draws_durations=True,
  params=('clients_per_step',),
  slots='clients_per_step',
  array_builder=True,
)
def _synchronous(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
  return builders.synchronous(ctx.num_clients, s.clients_per_step, ctx.num_steps, **common)


@_kind(
  'fedbuff',
  draws_durations=True,
  params=('concurrency', 'buffer_size'),
  **_CLOCK,
)
def _fedbuff(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
  return builders.fedbuff(ctx.num_clients, s.concurrency, s.buffer_size, ctx.num_steps, **common)


@_kind('fully_async', draws_durations=True, params=('concurrency',), slots=1)
def _fully_async(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
  return builders.fully_async(ctx.num_clients, s.concurrency, ctx.num_steps, **common)


@_kind('waiting_windows', draws_durations=True, params=('wait_seconds',), slots=None)
def _waiting_windows(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
  return builders.waiting_windows(
    ctx.num_clients, ctx.num_steps, window=s.wait_seconds or None, **common
  )


def parse_multipliers(text: str) -> list[int] | None:
  """'1,2,3' -> [1, 2, 3]; '' -> None."""
  return [int(v) for v in text.split(',') if v.strip()] or None


@_kind(
  'random_staleness',
  draws_durations=False,
  params=('clients_per_step', 'window', 'local_steps_multipliers'),
  slots='clients_per_step',
  array_builder=True,
)
def _random_staleness(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
  return builders.random_staleness(
    ctx.num_clients,
    s.clients_per_step,
    ctx.num_steps,
    window=s.window,
    local_steps_multipliers=parse_multipliers(s.local_steps_multipliers),
    **common,
  )


def _fedecho(delay: str) -> Callable[..., Schedule]:
  def build(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
    return fedecho_table1.schedule(
      ctx.client_sizes,
      s.concurrency,
      s.buffer_size,
      ctx.num_steps,
      delay=delay,
      gamma=float(s.straggler_gamma),
      **common,
    )

  return build


for _delay in ('large', 'mild'):
  _kind(
    f'fedecho_{_delay}',
    draws_durations=False,
    params=('concurrency', 'buffer_size', 'straggler_gamma'),
    **_CLOCK,
  )(_fedecho(_delay))


@_kind(
  'port',
  draws_durations=True,
  params=('concurrency', 'staleness_bound', 'urgent', 'buffer_size'),
  **_CLOCK,
)
def _port(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
  """Port's staleness-bounded FedBuff clock: ``schedule.staleness_bound`` B, ``.urgent``."""
  return port_clock.port_clock(
    ctx.num_clients,
    s.concurrency,
    s.buffer_size,
    int(s.get('staleness_bound', 10)),
    ctx.num_steps,
    urgent=bool(s.get('urgent', False)),
    **common,
  )


# A measured trace (per-client speeds or recorded jobs); it checks its own fields.
@_kind('trace', draws_durations=True, slots='buffer_size')
def _trace(s: Any, ctx: ScheduleContext, **common: Any) -> Schedule:
  """A trace file, ``schedule.trace`` (afl_jax/schedules/traces.py)."""
  return traces.schedule(s, ctx, **common)
