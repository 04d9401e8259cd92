"""MasFL and AdaMasFL, with the tuning-free hyperparameters of their theorems.

Yan, Zhong, Wang, Zhang, "Momentum-Driven Adaptivity: Towards Tuning-Free
Asynchronous Federated Learning" (paper 000):

* MasFL, Algorithms 1-2 (server :func:`afl_jax.servers.masfl.masfl_server`, client
  :func:`afl_jax.clients.masfl.masfl_client`), with the rates of Theorem 3.1 and
  Table 1: :func:`masfl_theory`;
* AdaMasFL, Algorithms 3-4 (normalized local steps, the server steps along the mean
  ``Delta_i``), with the rates of Theorem 4.1: :func:`adamasfl_theory`.

Hyperparameters (paper symbol -> name): eta -> ``client_lr``, gamma -> ``server_lr``,
beta -> ``beta``, S -> ``arrivals_per_step``, K -> ``local_steps``, T -> ``num_rounds``,
L -> ``smoothness``, tau_max -> ``tau_max`` (the paper's delay counter); ``weighting``
'uniform' (the paper's ``1/S`` and ``1/N``) or 'examples'. A rate left as ``None`` is
the theorem's at S, K, T given, else the schedule's (read by ``Algorithm.prepare``),
else :data:`STANDALONE`: (docs/algorithms/masfl.md, "Theory rates (defaults for rates
left as `None`)"). Both algorithms initialize ``c_i^0`` for every client through
``Algorithm.init`` (one vmapped pass over all N clients). Equations in
(docs/algorithms/masfl.md, "Equations as implemented").
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np

from afl_jax.algorithms.registry import joint_init, register
from afl_jax.clients.masfl import history_depth, masfl_client
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.masfl import SELECTIONS, init_state, masfl_server


class TheoryRates(NamedTuple):
  client_lr: float  # eta
  server_lr: float  # gamma
  beta: float


def _skt(arrivals_per_step: int, local_steps: int, num_rounds: int) -> tuple[int, int, int]:
  """S, K, T checked: integers >= 1."""
  return (
    checks.positive_int('arrivals_per_step', arrivals_per_step),
    checks.positive_int('local_steps', local_steps),
    checks.positive_int('num_rounds', num_rounds),
  )


def _beta(s: int, k: int, t: int) -> float:
  if s * k > t:
    raise ValueError(
      f'num_rounds={t} must be >= arrivals_per_step * local_steps = {s * k} '
      'so that beta = sqrt(SK/T) <= 1.'
    )
  return math.sqrt(s * k / t)


def adamasfl_theory(arrivals_per_step: int, local_steps: int, num_rounds: int) -> TheoryRates:
  """Theorem 4.1: ``gamma = (SK)^{1/4} / T^{3/4}``, ``eta = 1/(K sqrt T)``,
  ``beta = sqrt(SK/T)``."""
  s, k, t = _skt(arrivals_per_step, local_steps, num_rounds)
  return TheoryRates(
    client_lr=1.0 / (k * math.sqrt(t)), server_lr=(s * k) ** 0.25 / t**0.75, beta=_beta(s, k, t)
  )


def masfl_theory(
  arrivals_per_step: int, local_steps: int, num_rounds: int, smoothness: float, tau_max: int
) -> TheoryRates:
  """Theorem 3.1: ``beta = sqrt(SK/T)``, ``gamma = beta/(4L)``, eta = its upper bound.

  Raises:
    ValueError: the theorem's condition ``T - sqrt(SKT) - 4 S K tau_max^2 >= 0`` fails.
  """
  s, k, t = _skt(arrivals_per_step, local_steps, num_rounds)
  if not smoothness > 0:
    raise ValueError(f'smoothness (L) must be > 0; got {smoothness}.')
  checks.positive_int('tau_max', tau_max, 0)
  beta = _beta(s, k, t)
  room = t - math.sqrt(s * k * t) - 4 * s * k * tau_max**2
  if room < 0:
    raise ValueError(
      f'num_rounds={t} is too small for Theorem 3.1 with arrivals_per_step={s}, '
      f'local_steps={k}, tau_max={tau_max}: T - sqrt(SKT) - 4SK tau_max^2 = '
      f'{room:.4g} < 0.'
    )
  eta = math.sqrt(room) / (4 * math.sqrt(5) * math.e * k * smoothness * math.sqrt(t))
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
  """The MasFL (``adaptive=False``) or AdaMasFL recipe with explicit rates.

  ``history`` is the depth of each client's record of its sent variates (see
  :mod:`afl_jax.clients.masfl`); the returned algorithm's ``prepare`` resizes it to
  :func:`~afl_jax.clients.masfl.history_depth` of the run's schedule, so the
  correction c~_i of every job is causal on any schedule.
  """
  client = masfl_client(client_lr, beta, normalize=adaptive, history=history)
  server = masfl_server(
    server_lr,
    beta,
    adaptive=adaptive,
    selection=selection,
    weighting=weighting,
  )

  def server_init(params, tasks, states):
    """c_i^0 for all N clients in one vmapped pass; c^0 = mean_i c_i^0, g^0 = c^0."""
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
  """S, K, T of a schedule (or of a list of schedules, which must agree).

  S: the largest number of arrivals in a step; K: the median local step count over
  the schedule's jobs; T: its number of server steps.
  """
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


# What the hyperparameters of both MasFL variants accept (beyond the shared specs).
SPECS = {'beta': checks.real(0.0, 1.0, low_open=True), 'selection': checks.choice(SELECTIONS)}


@register(
  'masfl',
  context=RUN_INPUTS,
  **{**SPECS, 'smoothness': checks.POSITIVE, 'tau_max': checks.integer(0)},
)
def masfl(
  client_lr: float | None = None,
  server_lr: float | None = None,
  beta: float | None = None,
  arrivals_per_step: int | None = None,
  local_steps: int | None = None,
  num_rounds: int | None = None,
  smoothness: float | None = None,
  tau_max: int | None = None,
  selection: str = 'arrivals',
  weighting: str = 'uniform',
) -> Algorithm:
  """MasFL (Alg. 1-2): eta = client_lr, gamma = server_lr; missing rates from Thm 3.1.

  With ``beta`` given and ``server_lr`` missing, ``gamma = beta / (4L)`` uses that beta.
  S, K, T not given are the run's (:func:`schedule_inputs`, in ``prepare``), or
  :data:`STANDALONE` for a rule called outside a run; ``smoothness`` defaults to
  :data:`DEFAULT_SMOOTHNESS` and ``tau_max`` to :data:`DEFAULT_TAU_MAX`.
  """
  lips = DEFAULT_SMOOTHNESS if smoothness is None else smoothness
  tau = DEFAULT_TAU_MAX if tau_max is None else tau_max
  if not lips > 0:
    raise ValueError(f'smoothness (L) must be > 0; got {smoothness}.')

  def make(arrivals_per_step, local_steps, num_rounds) -> Algorithm:
    b = beta
    if b is None:
      b = _beta(*_skt(arrivals_per_step, local_steps, num_rounds))
    gamma = b / (4 * lips) if server_lr is None else server_lr
    eta = client_lr
    if eta is None:
      eta = masfl_theory(arrivals_per_step, local_steps, num_rounds, lips, tau).client_lr
    return build('masfl', eta, gamma, b, adaptive=False, selection=selection, weighting=weighting)

  needed = beta is None or client_lr is None
  return _with_run_inputs(make, needed, arrivals_per_step, local_steps, num_rounds)


@register('adamasfl', context=RUN_INPUTS, **SPECS)
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
  """AdaMasFL (Alg. 3-4): eta = client_lr, gamma = server_lr; missing rates from Thm 4.1.

  S, K, T not given are the run's (:func:`schedule_inputs`, in ``prepare``), or
  :data:`STANDALONE` for a rule called outside a run.
  """

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


__all__ = [
  'STANDALONE',
  'TheoryRates',
  'adamasfl',
  'adamasfl_theory',
  'build',
  'masfl',
  'masfl_theory',
  'schedule_inputs',
]
