"""MasFL (Alg. 1-2) and AdaMasFL (Alg. 3-4) of Yan et al., rates left as None from Theorem 3.1 / 4.1
(docs/algorithms/masfl.md)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from afl_jax import checks
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  CLIENTS,
  SERVERS,
  client_weights,
  joint_init,
  row_weights,
  run_local_steps,
  sgd_with_mean_gradient,
  steps_run,
  uniform_weights,
)
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, ClientRule, Params, ServerRule, unchanged_if_no_arrival
from afl_jax.registry import Registry

SPECS = {
  'beta': checks.real(0.0, 1.0, low_open=True),
  'selection': checks.choice(SELECTIONS := ('arrivals', 'uniform')),
}


class MasFLBroadcast(NamedTuple):  # Alg. 1 line 8 / Alg. 3 line 9
  params: Params  # theta^t
  direction: Params  # d^t = beta c^t + (1 - beta) g^t


class MasFLMessage(NamedTuple):  # Alg. 2 line 6 / Alg. 4 line 6
  variate: Params  # c~_i^{t+1}: mean of the job's K stochastic gradients
  delta: Params | None  # AdaMasFL: (theta_start - theta_K) / (eta K); MasFL: None


class MasFLClientState(NamedTuple):
  variates: Params  # the last D sent, newest first
  arrived: jax.Array  # the step each arrived at (-1 for c_i^0)


def history_depth(schedule: Any) -> int:
  """D, the history a causal ``c~_i`` needs: ``1 + max over jobs of #{i's arrivals in [s, t)}``."""
  if isinstance(schedule, list | tuple):
    return max(history_depth(s) for s in schedule)
  mask = np.asarray(schedule.mask)
  t_idx = np.broadcast_to(np.arange(mask.shape[0])[:, None], mask.shape)[mask]
  ids, starts = np.asarray(schedule.client_ids)[mask], np.asarray(schedule.start_step)[mask]
  if ids.size == 0:
    return 1
  span = np.int64(mask.shape[0] + 1)  # key (client, step) -> client * span + step
  ids = ids.astype(np.int64)
  keys = np.sort(ids * span + t_idx)
  hi = np.searchsorted(keys, ids * span + t_idx)  # i's arrivals before t
  lo = np.searchsorted(keys, ids * span + starts)  # i's arrivals before s
  return 1 + int((hi - lo).max())


def initial_variate(params: Params, task, key: jax.Array) -> Params:
  """c_i^0 (Alg. 1 line 1): the mean of K_i stochastic gradients at ``params``."""

  def body(total, batch, k):
    loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
    return tree.add(total, g), loss

  total, _ = run_local_steps(task, key, tree.zeros_like(params), body)
  return tree.scale(1.0 / steps_run(task), total)


def normalized(g: Params) -> Params:
  """``g / ||g||`` (global l2 norm); 0 when ``||g|| = 0``."""
  norm = tree.global_norm(g)
  safe = jnp.where(norm > 0, norm, 1.0)
  return tree.scale(jnp.where(norm > 0, 1.0 / safe, 0.0), g)


@CLIENTS.register('masfl', beta=SPECS['beta'], history=checks.integer(1))
def masfl_client(client_lr: float, beta: float, *, normalize: bool = False, history: int = 1):
  """MasFL's client (Alg. 2), AdaMasFL's (Alg. 4) with ``normalize``; D = ``history``."""

  def init(params, task, key):
    c0 = initial_variate(params, task, key)  # Alg. 1/3 line 1
    return MasFLClientState(tree.stack_n(c0, history), jnp.full((history,), -1, jnp.int32))

  def update(start: MasFLBroadcast, state: MasFLClientState, task, key):
    # c~_i: the newest entry arrived before the job's start step (else the newest)
    index = 0
    if task.start_step is not None:
      before = state.arrived < task.start_step
      index = jnp.where(jnp.any(before), jnp.argmax(before), before.shape[0] - 1)
    c_tilde = tree.gather(state.variates, index)

    def direction(grad):  # Alg. 2/4 line 3: beta (grad - c~_i + c^{t-tau}) + (1 - beta) g^{t-tau}
      g = tree.axpy(beta, tree.sub(grad, c_tilde), start.direction)
      return normalized(g) if normalize else g

    final, variate, metrics = sgd_with_mean_gradient(task, key, start.params, client_lr, direction)
    delta = None
    if normalize:
      delta = tree.scale(1.0 / (client_lr * steps_run(task)), tree.sub(start.params, final))
    step = state.arrived[0] + 1 if task.step is None else task.step
    variates = jax.tree.map(
      lambda h, v: jnp.concatenate([v[None].astype(h.dtype), h[:-1]]), state.variates, variate
    )
    arrived = jnp.concatenate([jnp.asarray(step, jnp.int32)[None], state.arrived[:-1]])
    return MasFLMessage(variate, delta), MasFLClientState(variates, arrived), metrics

  return ClientRule(init, update)


adamasfl_client = CLIENTS.register('adamasfl', masfl_client, fixed={'normalize': True})


class MasFLServerState(NamedTuple):
  params: Params  # theta^t
  variates: Params  # c_i^t, leading axis N
  control: Params  # c^t = mean_i c_i^t
  momentum: Params  # g^t
  pending: MasFLMessage | None  # 'uniform': latest finished message per client [N]; else None
  shares: jax.Array  # float[N], p_i: 1/N, or n_i / sum_j n_j by examples

  @property
  def num_clients(self) -> int:
    return self.shares.shape[0]


def init_state(params, variates, *, selection='arrivals', adaptive=False, num_examples=None):
  """Alg. 1/3 line 1: ``c^0 = sum_i p_i c_i^0``, ``g^0 = c^0``; ``p_i`` uniform or by
  ``num_examples``."""
  n = jax.tree.leaves(variates)[0].shape[0]
  shares = uniform_weights(n) if num_examples is None else client_weights(num_examples)
  control = tree.weighted_sum(variates, shares)
  pending = None
  if selection == 'uniform':
    pending = MasFLMessage(variates, tree.zeros_like(variates) if adaptive else None)
  return MasFLServerState(params, variates, control, control, pending, shares)


def uniform_selection(key: jax.Array, num_clients: int, count: jax.Array) -> jax.Array:
  """bool[N]: ``count`` distinct clients drawn uniformly (``count`` may be traced)."""
  rank = jnp.argsort(jnp.argsort(jax.random.uniform(key, (num_clients,))))
  return rank < count


@SERVERS.register('masfl', context=('num_clients',), **SPECS)
def masfl_server(
  server_lr: float,
  beta: float,
  *,
  adaptive: bool = False,
  selection: str = 'arrivals',
  num_clients: int = 10,
  weighting: str = 'uniform',
) -> ServerRule:
  """The MasFL server (Alg. 1), AdaMasFL's (Alg. 3) with ``adaptive``; ``init`` starts ``c_i`` at 0
  (the paper's ``c_i^0``: :func:`init_state`)."""
  examples = weighting == 'examples'

  def init(params):
    variates = tree.zeros_like(tree.stack_n(params, num_clients))
    return init_state(params, variates, selection=selection, adaptive=adaptive)

  def step(state, diff, weights, variates, direction, p):
    # Lines 5-7 given the rows ``diff`` of ``c_i^{t+1} - c_i^t`` and their weights.
    mean_diff = tree.weighted_sum(diff, weights)
    momentum = jax.tree.map(
      lambda md, c, g: beta * (md + c) + (1 - beta) * g, mean_diff, state.control, state.momentum
    )
    move = momentum if direction is None else direction
    params = tree.axpy(-server_lr, move, state.params)
    control = tree.add(state.control, tree.weighted_sum(diff, p))
    return state._replace(params=params, variates=variates, control=control, momentum=momentum)

  def update(state: MasFLServerState, messages: MasFLMessage, arrivals, key):
    mask, ids = arrivals.mask, arrivals.client_ids
    count, n, p_all = jnp.sum(mask), state.num_clients, state.shares
    if selection == 'arrivals':  # O(M) work: only the arriving rows of c_i change
      diff = tree.sub(messages.variate, tree.gather(state.variates, ids))
      variates = tree.scatter(state.variates, ids, messages.variate, mask)
      weights = row_weights(arrivals, examples=examples)
      direction = tree.weighted_sum(messages.delta, weights) if adaptive else None
      new = step(state, diff, weights, variates, direction, p_all[ids] * mask)
    else:
      pending = tree.scatter(state.pending, ids, messages, mask)
      chosen = uniform_selection(key, n, count)
      weights = chosen * p_all / jnp.where(count > 0, jnp.sum(chosen * p_all), 1.0)
      rows = lambda x: chosen.reshape((n,) + (1,) * (x.ndim - 1))
      diff = tree.sub(pending.variate, state.variates)
      variates = jax.tree.map(
        lambda new, old: jnp.where(rows(old), new, old), pending.variate, state.variates
      )
      direction = None
      if adaptive:
        direction = tree.weighted_sum(pending.delta, weights)
        pending = pending._replace(
          delta=jax.tree.map(lambda d: jnp.where(rows(d), 0, d), pending.delta)
        )
      new = step(state, diff, weights, variates, direction, chosen * p_all)._replace(
        pending=pending
      )
    new = unchanged_if_no_arrival(arrivals, new, state)
    return new, {
      'update_norm': tree.global_norm(tree.sub(state.params, new.params)),
      'momentum_norm': tree.global_norm(new.momentum),
    }

  def broadcast(state: MasFLServerState) -> MasFLBroadcast:
    direction = jax.tree.map(lambda c, g: beta * c + (1 - beta) * g, state.control, state.momentum)
    return MasFLBroadcast(state.params, direction)

  return ServerRule(init, update, broadcast)


adamasfl_server = SERVERS.register('adamasfl', masfl_server, fixed={'adaptive': True})


class TheoryRates(NamedTuple):
  client_lr: float  # eta
  server_lr: float  # gamma
  beta: float


# The theorems' inputs: S, K, T (run facts) and L, tau_max, margin.
RUN_SPECS = {k: checks.integer(1) for k in ('arrivals_per_step', 'local_steps', 'num_rounds')}
THEORY_SPECS = {
  **RUN_SPECS,
  'smoothness': checks.POSITIVE,
  'tau_max': checks.integer(0),
  'margin': checks.real(0.0, 1.0, high_open=True),
}


def _room(s: int, k: int, t: int, tau_max: int) -> float:  # Theorem 3.1's slack (>= 0)
  return t - math.sqrt(s * k * t) - 4 * s * k * tau_max**2


SK_AT_MOST_T = checks.Rule(
  'num_rounds',
  lambda arrivals_per_step, local_steps, num_rounds: (
    f'must be >= arrivals_per_step * local_steps = {arrivals_per_step * local_steps} so that '
    'beta = sqrt(SK/T) <= 1'
    if arrivals_per_step * local_steps > num_rounds
    else None
  ),
)
ROOM = checks.Rule(
  'num_rounds',
  lambda arrivals_per_step, local_steps, num_rounds, tau_max: (
    f'is too small for Theorem 3.1 with arrivals_per_step={arrivals_per_step}, local_steps='
    f'{local_steps}, tau_max={tau_max}: T - sqrt(SKT) - 4SK tau_max^2 = '
    f'{_room(arrivals_per_step, local_steps, num_rounds, tau_max):.4g} < 0'
    if _room(arrivals_per_step, local_steps, num_rounds, tau_max) < 0
    else None
  ),
)
THEOREMS = Registry('theorem')  # the theorems' rates from their inputs


@THEOREMS.register('adamasfl', rules=(SK_AT_MOST_T,), **RUN_SPECS)
def adamasfl_theory(arrivals_per_step: int, local_steps: int, num_rounds: int) -> TheoryRates:
  """Theorem 4.1: ``gamma = (SK)^{1/4} / T^{3/4}``, ``eta = 1/(K sqrt T)``, ``beta =
  sqrt(SK/T)``."""
  s, k, t = arrivals_per_step, local_steps, num_rounds
  return TheoryRates(1.0 / (k * math.sqrt(t)), (s * k) ** 0.25 / t**0.75, math.sqrt(s * k / t))


@THEOREMS.register('masfl', rules=(SK_AT_MOST_T, ROOM), **THEORY_SPECS)
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
  beta = math.sqrt(s * k / t)
  eta = math.sqrt((1 - margin) * _room(s, k, t, tau_max)) / (
    4 * math.sqrt(5) * math.e * k * smoothness * math.sqrt(t)
  )
  return TheoryRates(client_lr=eta, server_lr=beta / (4 * smoothness), beta=beta)


def build(name, client_lr, server_lr, beta, *, adaptive, selection, weighting, history=1):
  """The MasFL or AdaMasFL recipe with explicit rates and D = ``history``."""
  given = dict(adaptive=adaptive, selection=selection, weighting=weighting)
  client = masfl_client(client_lr, beta, normalize=adaptive, history=history)

  def server_init(params, tasks, states):
    c0 = jax.tree.map(lambda v: v[:, 0], states.variates)
    counts = tasks.num_examples if weighting == 'examples' else None
    return init_state(params, c0, selection=selection, adaptive=adaptive, num_examples=counts)

  server = masfl_server(server_lr, beta, **given)
  return Algorithm(name, client, server, init=joint_init(client, server_init))


# S, K, T of a rule built outside any run (a run's ``prepare`` reads them from its schedule).
STANDALONE = {'arrivals_per_step': 1, 'local_steps': 1, 'num_rounds': 100}


def schedule_inputs(schedule) -> dict[str, int]:
  """S (widest step), K (median local steps) and T of a schedule, or of schedules that agree."""
  found = {
    (int(one.max_arrivals), int(np.median(one.local_steps[one.mask])), int(one.num_steps))
    for one in (schedule if isinstance(schedule, list | tuple) else [schedule])
  }
  if len(found) != 1:
    raise ValueError(f'the schedules disagree on (S, K, T): {sorted(found)}; give them explicitly.')
  return dict(zip(STANDALONE, found.pop(), strict=True))


def _masfl(
  client_lr: float | None = None,
  server_lr: float | None = None,
  beta: float | None = None,
  arrivals_per_step: int | None = None,
  local_steps: int | None = None,
  num_rounds: int | None = None,
  smoothness: float | None = None,
  tau_max: int | None = None,
  margin: float = 0.0,
  **server: Any,
) -> Algorithm:
  """MasFL, its rates left as None from Theorem 3.1, or (``adaptive``) AdaMasFL from Theorem 4.1;
  S, K, T not given: the schedule's (in prepare), else STANDALONE; D sized in prepare."""
  adaptive = server['adaptive']
  name = 'adamasfl' if adaptive else 'masfl'
  given = (client_lr, server_lr, beta)
  skt = dict(zip(STANDALONE, (arrivals_per_step, local_steps, num_rounds), strict=True))
  needed = None in given if adaptive else beta is None or client_lr is None

  def make(history, arrivals_per_step, local_steps, num_rounds) -> Algorithm:
    s, k, t = arrivals_per_step, local_steps, num_rounds
    if adaptive:  # the theorem's rates only where none is given
      theory = adamasfl_theory(s, k, t) if needed else given
      return build(
        name, *(r if g is None else g for g, r in zip(given, theory)), **server, history=history
      )
    lips = 1.0 if smoothness is None else smoothness
    b = math.sqrt(s * k / t) if beta is None else beta
    gamma = b / (4 * lips) if server_lr is None else server_lr
    tau = 0 if tau_max is None else tau_max
    eta = masfl_theory(s, k, t, lips, tau, margin).client_lr if client_lr is None else client_lr
    return build(name, eta, gamma, b, **server, history=history)

  reads_run = needed and None in skt.values()

  def prepare(current: Algorithm, schedule) -> Algorithm:
    depth = history_depth(schedule)
    if depth == 1 and not reads_run:
      return current
    run = schedule_inputs(schedule) if reads_run else skt
    sized = make(depth, **{k: run[k] if v is None else v for k, v in skt.items()})
    return current._replace(client=sized.client, server=sized.server, init=sized.init)

  alg = make(1, **{k: STANDALONE[k] if v is None else v for k, v in skt.items()})
  return alg._replace(prepare=prepare)


RULE = {'context': tuple(STANDALONE), 'uses': (masfl_server,)}
masfl = ALGORITHMS.register('masfl', _masfl, **RULE, fixed={'adaptive': False}, **THEORY_SPECS)
THEORY_ONLY = {'smoothness': None, 'tau_max': None, 'margin': 0.0}  # AdaMasFL's theorem: S, K, T
adamasfl = ALGORITHMS.register(
  'adamasfl', _masfl, **RULE, fixed={'adaptive': True, **THEORY_ONLY}, **RUN_SPECS
)
