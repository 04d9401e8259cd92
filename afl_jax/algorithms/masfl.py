"""MasFL and AdaMasFL, with the tuning-free hyperparameters of their theorems.

Yan, Zhong, Wang, Zhang, "Momentum-Driven Adaptivity: Towards Tuning-Free
Asynchronous Federated Learning" (papers/000):

* MasFL, Algorithms 1-2 (server :func:`afl_jax.servers.masfl.masfl_server`, client
  :func:`afl_jax.clients.masfl.masfl_client`). Theorem 3.1: ``beta = sqrt(SK/T)``,
  ``gamma = beta / (4L)``, and ``eta <= sqrt(T - sqrt(SKT) - 4 S K tau_max^2) /
  (4 sqrt(5) e K L sqrt(T))`` (also Table 1); :func:`masfl_theory` returns the bound.
* AdaMasFL, Algorithms 3-4 (normalized local steps, the server steps along the mean
  ``Delta_i``). Theorem 4.1: ``gamma = (SK)^{1/4} / T^{3/4}``, ``eta = 1 / (K sqrt(T))``,
  ``beta = sqrt(SK/T)``: :func:`adamasfl_theory`.

Hyperparameters (paper symbol -> name): eta -> ``client_lr``, gamma -> ``server_lr``,
beta -> ``beta``, S -> ``arrivals_per_step``, K -> ``local_steps``, T -> ``num_rounds``,
L -> ``smoothness``, tau_max -> ``tau_max`` (the paper's delay counter).
``weighting``: 'uniform' (the paper's ``1/S`` and ``1/N``) or 'examples' (by the
clients' example counts, which travel with the tasks and messages;
:func:`afl_jax.servers.masfl.masfl_server`). A rate left
as ``None`` is taken from the theorem, which then needs S, K, T (and, for MasFL's
gamma and eta, L and tau_max); the experiment pipeline fills ``arrivals_per_step``,
``local_steps`` and ``num_rounds`` from the run. Both algorithms initialize ``c_i^0``
for every client through ``Algorithm.init`` (one vmapped pass over all N clients).
Docs: docs/algorithms/masfl.md.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax

from afl_jax.algorithms.registry import register
from afl_jax.clients.masfl import history_depth, masfl_client
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.masfl import SELECTIONS, check_selection, init_state, masfl_server


class TheoryRates(NamedTuple):
  client_lr: float  # eta
  server_lr: float  # gamma
  beta: float


def _positive_int(name: str, value) -> int:
  if isinstance(value, bool) or not isinstance(value, int) or value < 1:
    raise ValueError(f'{name} must be an integer >= 1; got {value!r}.')
  return value


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
  s = _positive_int('arrivals_per_step', arrivals_per_step)
  k = _positive_int('local_steps', local_steps)
  t = _positive_int('num_rounds', num_rounds)
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
  s = _positive_int('arrivals_per_step', arrivals_per_step)
  k = _positive_int('local_steps', local_steps)
  t = _positive_int('num_rounds', num_rounds)
  if not smoothness > 0:
    raise ValueError(f'smoothness (L) must be > 0; got {smoothness}.')
  if isinstance(tau_max, bool) or not isinstance(tau_max, int) or tau_max < 0:
    raise ValueError(f'tau_max must be an integer >= 0; got {tau_max!r}.')
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


def _need(name: str, **given) -> None:
  missing = sorted(k for k, v in given.items() if v is None)
  if missing:
    raise ValueError(
      f'{name}: pass client_lr, server_lr and beta, or the theorem inputs; missing {missing}.'
    )


def _check_rates(client_lr: float, server_lr: float, beta: float) -> None:
  checks.positive('client_lr', client_lr)
  checks.positive('server_lr', server_lr)
  checks.in_range('beta', beta, 0.0, 1.0, low_open=True)


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
  _check_rates(client_lr, server_lr, beta)
  check_selection(selection)
  client = masfl_client(client_lr, beta, normalize=adaptive, history=history)
  server = masfl_server(
    server_lr,
    beta,
    adaptive=adaptive,
    selection=selection,
    weighting=weighting,
  )

  def init(params, tasks, key):
    """c_i^0 for all N clients in one vmapped pass; c^0 = mean_i c_i^0, g^0 = c^0."""
    n = tasks.client_id.shape[0]
    keys = jax.random.split(key, n)
    states = jax.vmap(client.init, in_axes=(None, tasks.batch_axes(), 0))(params, tasks, keys)
    c0 = jax.tree.map(lambda v: v[:, 0], states.variates)
    counts = tasks.num_examples if weighting == 'examples' else None
    state = init_state(params, c0, selection=selection, adaptive=adaptive, num_examples=counts)
    return state, states

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


@register(
  'masfl',
  context=('arrivals_per_step', 'local_steps', 'num_rounds'),
  hparams={
    'beta': checks.real(0.0, 1.0, low_open=True),
    'smoothness': checks.POSITIVE,
    'tau_max': checks.integer(0),
    'selection': checks.choice(SELECTIONS),
  },
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
  """
  if beta is None:
    _need(
      'masfl', arrivals_per_step=arrivals_per_step, local_steps=local_steps, num_rounds=num_rounds
    )
    beta = _beta(
      _positive_int('arrivals_per_step', arrivals_per_step),
      _positive_int('local_steps', local_steps),
      _positive_int('num_rounds', num_rounds),
    )
  if server_lr is None:
    _need('masfl', smoothness=smoothness)
    if not smoothness > 0:
      raise ValueError(f'smoothness (L) must be > 0; got {smoothness}.')
    server_lr = beta / (4 * smoothness)
  if client_lr is None:
    _need(
      'masfl',
      arrivals_per_step=arrivals_per_step,
      local_steps=local_steps,
      num_rounds=num_rounds,
      smoothness=smoothness,
      tau_max=tau_max,
    )
    client_lr = masfl_theory(
      arrivals_per_step, local_steps, num_rounds, smoothness, tau_max
    ).client_lr
  return build(
    'masfl',
    client_lr,
    server_lr,
    beta,
    adaptive=False,
    selection=selection,
    weighting=weighting,
  )


@register(
  'adamasfl',
  context=('arrivals_per_step', 'local_steps', 'num_rounds'),
  hparams={'beta': checks.real(0.0, 1.0, low_open=True), 'selection': checks.choice(SELECTIONS)},
)
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
  """AdaMasFL (Alg. 3-4): eta = client_lr, gamma = server_lr; missing rates from Thm 4.1."""
  if None in (client_lr, server_lr, beta):
    _need(
      'adamasfl',
      arrivals_per_step=arrivals_per_step,
      local_steps=local_steps,
      num_rounds=num_rounds,
    )
    theory = adamasfl_theory(arrivals_per_step, local_steps, num_rounds)
    client_lr = theory.client_lr if client_lr is None else client_lr
    server_lr = theory.server_lr if server_lr is None else server_lr
    beta = theory.beta if beta is None else beta
  return build(
    'adamasfl',
    client_lr,
    server_lr,
    beta,
    adaptive=True,
    selection=selection,
    weighting=weighting,
  )


__all__ = ['TheoryRates', 'adamasfl', 'adamasfl_theory', 'build', 'masfl', 'masfl_theory']
