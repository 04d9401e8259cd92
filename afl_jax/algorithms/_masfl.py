"""MasFL (Alg. 1-2) and AdaMasFL (Alg. 3-4) of Yan et al., rates left as None from Theorem 3.1 / 4.1
with S, K, T read from the run's schedule (docs/algorithms/masfl.md, "Theory rates")."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np

from afl_jax import clients, servers
from afl_jax.algorithms.registry import joint_init, register
from afl_jax.clients._masfl import history_depth
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers._masfl import init_state


class TheoryRates(NamedTuple):
  client_lr: float  # eta
  server_lr: float  # gamma
  beta: float


# The theorems' inputs S, K, T (run facts) and L, tau_max.
RUN_SPECS = {
  'arrivals_per_step': checks.integer(1),
  'local_steps': checks.integer(1),
  'num_rounds': checks.integer(1),
}


def _beta(s: int, k: int, t: int) -> float:
  if s * k > t:
    raise ValueError(
      f'num_rounds={t} must be >= arrivals_per_step * local_steps = {s * k} '
      'so that beta = sqrt(SK/T) <= 1.'
    )
  return math.sqrt(s * k / t)


@checks.validated(**RUN_SPECS)
def adamasfl_theory(arrivals_per_step: int, local_steps: int, num_rounds: int) -> TheoryRates:
  """Theorem 4.1: ``gamma = (SK)^{1/4} / T^{3/4}``, ``eta = 1/(K sqrt T)``, ``beta =
  sqrt(SK/T)``."""
  s, k, t = arrivals_per_step, local_steps, num_rounds
  return TheoryRates(
    client_lr=1.0 / (k * math.sqrt(t)), server_lr=(s * k) ** 0.25 / t**0.75, beta=_beta(s, k, t)
  )


@checks.validated(
  smoothness=checks.POSITIVE,
  tau_max=checks.integer(0),
  margin=checks.real(0.0, 1.0, high_open=True),
  **RUN_SPECS,
)
def masfl_theory(
  arrivals_per_step: int,
  local_steps: int,
  num_rounds: int,
  smoothness: float,
  tau_max: int,
  margin: float = 0.0,
) -> TheoryRates:
  """Theorem 3.1: ``beta = sqrt(SK/T)``, ``gamma = beta/(4L)``, eta ``sqrt(1 - margin)`` times its
  bound (docs/algorithms/masfl.md)."""
  s, k, t = arrivals_per_step, local_steps, num_rounds
  beta = _beta(s, k, t)
  room = t - math.sqrt(s * k * t) - 4 * s * k * tau_max**2
  if room < 0:
    raise ValueError(
      f'num_rounds={t} is too small for Theorem 3.1 with arrivals_per_step={s}, '
      f'local_steps={k}, tau_max={tau_max}: T - sqrt(SKT) - 4SK tau_max^2 = '
      f'{room:.4g} < 0.'
    )
  eta = math.sqrt((1 - margin) * room) / (4 * math.sqrt(5) * math.e * k * smoothness * math.sqrt(t))
  return TheoryRates(client_lr=eta, server_lr=beta / (4 * smoothness), beta=beta)


def build(
  name: str,
  client_lr: float,
  server_lr: float,
  beta: float,
  *,
  adaptive: bool,
  selection: str = 'arrivals',
  history: int = 1,
  weighting: str = 'uniform',
) -> Algorithm:
  """The MasFL or AdaMasFL recipe with explicit rates; ``prepare`` sizes the variate history."""
  client = clients.masfl(client_lr, beta, normalize=adaptive, history=history)
  server = servers.masfl(
    server_lr,
    beta,
    adaptive=adaptive,
    selection=selection,
    weighting=weighting,
  )

  def server_init(params, tasks, states):
    c0 = jax.tree.map(lambda v: v[:, 0], states.variates)
    counts = tasks.num_examples if weighting == 'examples' else None
    return init_state(params, c0, selection=selection, adaptive=adaptive, num_examples=counts)

  init = joint_init(client, server_init)

  def prepare(alg: Algorithm, schedule) -> Algorithm:
    depth = history_depth(schedule)
    if depth == history:
      return alg
    sized = build(
      name,
      client_lr,
      server_lr,
      beta,
      adaptive=adaptive,
      selection=selection,
      history=depth,
      weighting=weighting,
    )
    return alg._replace(client=sized.client, init=sized.init)

  return Algorithm(name, client, server, init=init, prepare=prepare)


# The theorem inputs a rate left as None falls back on. S, K, T: a run's ``prepare``
# reads them from its schedule (:func:`schedule_inputs`); a rule built and called on
# its own, outside any run, uses STANDALONE. L and tau_max are never read from a run.
STANDALONE = {'arrivals_per_step': 1, 'local_steps': 1, 'num_rounds': 100}
DEFAULT_SMOOTHNESS = 1.0  # L when not given
DEFAULT_TAU_MAX = 0  # tau_max when not given (no delay term)
RUN_INPUTS = tuple(STANDALONE)


def schedule_inputs(schedule) -> dict[str, int]:
  """S (widest step), K (median local steps) and T of a schedule, or of schedules that agree."""
  found = {
    (
      int(one.max_arrivals),
      int(np.median(one.local_steps[one.mask])),
      int(one.num_steps),
    )
    for one in (schedule if isinstance(schedule, list | tuple) else [schedule])
  }
  if len(found) != 1:
    raise ValueError(f'the schedules disagree on (S, K, T): {sorted(found)}; give them explicitly.')
  return dict(zip(RUN_INPUTS, found.pop(), strict=True))


def _with_run_inputs(make, needed: bool, *skt: int | None) -> Algorithm:
  """``make(S, K, T)`` with those not given filled: the schedule's (in prepare) > STANDALONE."""
  given = dict(zip(RUN_INPUTS, skt, strict=True))
  if not needed or None not in given.values():
    return make(**given)
  alg = make(**{k: STANDALONE[k] if v is None else v for k, v in given.items()})

  def prepare(current: Algorithm, schedule) -> Algorithm:
    run = schedule_inputs(schedule)
    sized = make(**{k: run[k] if v is None else v for k, v in given.items()})
    sized = sized.prepare(sized, schedule)  # the history depth
    return current._replace(client=sized.client, server=sized.server, init=sized.init)

  return alg._replace(prepare=prepare)


@register('masfl', context=RUN_INPUTS, uses=(servers.masfl, masfl_theory))
def masfl(
  client_lr: float | None = None,
  server_lr: float | None = None,
  beta: float | None = None,
  arrivals_per_step: int | None = None,
  local_steps: int | None = None,
  num_rounds: int | None = None,
  smoothness: float | None = None,
  tau_max: int | None = None,
  margin: float = 0.0,
  selection: str = 'arrivals',
  weighting: str = 'uniform',
) -> Algorithm:
  lips = DEFAULT_SMOOTHNESS if smoothness is None else smoothness
  tau = DEFAULT_TAU_MAX if tau_max is None else tau_max

  def make(arrivals_per_step, local_steps, num_rounds) -> Algorithm:
    b = beta
    if b is None:
      b = _beta(arrivals_per_step, local_steps, num_rounds)
    gamma = b / (4 * lips) if server_lr is None else server_lr
    eta = client_lr
    if eta is None:
      eta = masfl_theory(arrivals_per_step, local_steps, num_rounds, lips, tau, margin).client_lr
    return build('masfl', eta, gamma, b, adaptive=False, selection=selection, weighting=weighting)

  needed = beta is None or client_lr is None
  return _with_run_inputs(make, needed, arrivals_per_step, local_steps, num_rounds)


@register('adamasfl', context=RUN_INPUTS, uses=(servers.adamasfl, adamasfl_theory))
def adamasfl(
  client_lr: float | None = None,
  server_lr: float | None = None,
  beta: float | None = None,
  arrivals_per_step: int | None = None,
  local_steps: int | None = None,
  num_rounds: int | None = None,
  selection: str = 'arrivals',
  weighting: str = 'uniform',
) -> Algorithm:

  def make(arrivals_per_step, local_steps, num_rounds) -> Algorithm:
    eta, gamma, b = client_lr, server_lr, beta
    if None in (eta, gamma, b):
      theory = adamasfl_theory(arrivals_per_step, local_steps, num_rounds)
      eta = theory.client_lr if eta is None else eta
      gamma = theory.server_lr if gamma is None else gamma
      b = theory.beta if b is None else b
    return build('adamasfl', eta, gamma, b, adaptive=True, selection=selection, weighting=weighting)

  needed = None in (client_lr, server_lr, beta)
  return _with_run_inputs(make, needed, arrivals_per_step, local_steps, num_rounds)
