"""AsynFL, AsynFLC and AsynFLC-EF (Yang, Hou, Wu, eqs. (2)-(5), (7), Alg. 1 eqs. (8)-(10))
(docs/algorithms/asynfl.md)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from afl_jax import checks, compression
from afl_jax.algorithms._shared import (
  ALGORITHMS,
  CLIENTS,
  SERVERS,
  ScalarOrSchedule,
  local_sgd,
  optimizer_server,
  sgd_steps,
)
from afl_jax.compression import COMPRESSORS
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, ClientRule, Params, ServerRule
from afl_jax.schedules.schedule import Schedule, ScheduleError


class AlwaysOnState(NamedTuple):
  local: Params
  anchor: Params  # the model it last synced to (eq. 3)
  synced: jax.Array  # bool scalar: it restarts from the next broadcast


@CLIENTS.register('always_on_sgd')
def always_on_sgd(client_lr: ScalarOrSchedule) -> ClientRule:
  """AsynFL's client (``regime='always_on'``): sends ``anchor - x_{t,K}``."""

  def init(params, task, key):
    # Alg. 1 "Initialize": x_0^{(i)} = x_0; before round 0 every client is in sync.
    return AlwaysOnState(local=params, anchor=params, synced=jnp.ones((), bool))

  def update(start: Params, state: AlwaysOnState, task, key):
    # eq. (4): restart from the global model after a report, else continue locally.
    x0 = tree.where(state.synced, start, state.local)
    anchor = tree.where(state.synced, start, state.anchor)
    x_k, metrics = sgd_steps(task, key, x0, client_lr)  # eq. (2)
    synced = jnp.asarray(task.active, bool)
    return tree.sub(anchor, x_k), AlwaysOnState(x_k, anchor, synced), metrics  # -(eq. 3)

  return ClientRule(init, update)


LOCAL_TRAINING = ('continuous', 'per_job')


@SERVERS.register('asynfl', context=('num_clients',))
def asynfl_server(
  server_lr: float = 1.0,
  *,
  normalizer: str = 'clients',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """Eq. (5)/(7)/(10); n = ``num_clients``, else the arrival axis' width (``prepare`` sets N)."""
  rule = lambda n: optimizer_server(
    optax.sgd(server_lr), normalizer=normalizer, num_clients=n, weighting=weighting
  )
  if num_clients is not None or normalizer != 'clients':
    return rule(num_clients)

  def update(state, messages, arrivals, key):  # n = M (static) when no run says otherwise
    return rule(arrivals.mask.shape[0]).update(state, messages, arrivals, key)

  return ServerRule(rule(None).init, update)


def continuous_starts(schedule: Schedule) -> np.ndarray:
  """int32[T, M]: the start step continuous training implies (eq. 4, Alg. 1 line 14)."""
  last = np.zeros(schedule.num_clients, np.int64)  # version each client last synced to
  out = np.array(schedule.start_step, np.int32)
  for t in range(schedule.num_steps):
    ids = schedule.client_ids[t][schedule.mask[t]]
    out[t, np.flatnonzero(schedule.mask[t])] = last[ids]
    last[ids] = t + 1
  return out


def check_schedule(
  schedule: Schedule, *, num_clients: int | None, continuous: bool, name: str = 'asynfl'
) -> None:
  """ScheduleError before any compute where ``num_clients`` is not the schedule's N or, continuous,
  an arrival's start or a client's K disagrees with eqs. (2)-(4)."""
  if num_clients is not None and num_clients != schedule.num_clients:
    n = schedule.num_clients
    raise ScheduleError(f'{name}: num_clients={num_clients}, but the schedule has {n} clients.')
  if not continuous:
    return
  implied = continuous_starts(schedule)
  bad = schedule.mask & (implied != schedule.start_step)
  if bad.any():
    t, j = (int(v) for v in np.argwhere(bad)[0])
    raise ScheduleError(
      f"{name} with local_training='continuous' (eq. 4): client {int(schedule.client_ids[t, j])} "
      f'arriving at step {t} has start_step={int(schedule.start_step[t, j])}, not '
      f"{int(implied[t, j])}; use schedules.waiting_windows or local_training='per_job'."
    )
  ids, ks = schedule.client_ids[schedule.mask], schedule.local_steps[schedule.mask]
  low = np.full(schedule.num_clients, np.iinfo(np.int32).max)
  high = np.zeros(schedule.num_clients, np.int64)
  np.minimum.at(low, ids, ks)
  np.maximum.at(high, ids, ks)
  varied = np.flatnonzero((high > 0) & (low != high))
  if varied.size:
    i = int(varied[0])
    raise ScheduleError(
      f"{name} with local_training='continuous' (eq. 2): client {i} has local_steps from "
      f"{int(low[i])} to {int(high[i])}; give each client one K or use local_training='per_job'."
    )


def _algorithm(
  name: str,
  client_lr: float,
  num_clients: int | None,
  local_training: str,
  compressor: compression.Compressor | None = None,
  **server: Any,
) -> Algorithm:
  continuous = local_training == 'continuous'

  def prepare(alg: Algorithm, schedule: Schedule) -> Algorithm:
    runs = schedule if isinstance(schedule, list | tuple) else [schedule]
    for one in runs:
      check_schedule(one, num_clients=num_clients, continuous=continuous, name=name)
    if num_clients is not None or server['normalizer'] != 'clients':
      return alg
    n = {one.num_clients for one in runs}
    if len(n) != 1:
      raise ScheduleError(f'{name}: the schedules have different client counts {sorted(n)}.')
    (n,) = n  # eq. (5)'s n is the run's N
    return alg._replace(server=asynfl_server(**server, num_clients=n))

  client = always_on_sgd(client_lr) if continuous else local_sgd(client_lr)
  server_rule = asynfl_server(**server, num_clients=num_clients)
  regime = 'always_on' if continuous else 'per_job'
  return Algorithm(name, client, server_rule, compressor, regime=regime, prepare=prepare)


OPTIONS = {'local_training': checks.choice(LOCAL_TRAINING)}


@ALGORITHMS.register('asynfl', context=('num_clients',), uses=(asynfl_server,), **OPTIONS)
def asynfl(
  client_lr: float = 0.01,
  num_clients: int | None = None,
  local_training: str = 'continuous',
  **server: Any,
) -> Algorithm:
  """AsynFL (eqs. 2-5); ``local_training`` 'continuous' (eq. 4) or 'per_job'."""
  return _algorithm('asynfl', client_lr, num_clients, local_training, **server)


def _takes_only_its_own(compressor: str, fraction, bits, scaled) -> str | None:
  takes = sorted(COMPRESSORS.settings(compressor))
  given = {'fraction': fraction, 'bits': bits, 'scaled': scaled}
  stray = sorted(k for k, v in given.items() if v is not None and k not in takes)
  return f'compressor {compressor!r} takes no {stray} (it takes {takes})' if stray else None


def _asynflc(
  client_lr: float = 0.01,
  num_clients: int | None = None,
  compressor: str = 'top_k',
  fraction: float | None = None,
  bits: int | None = None,
  scaled: bool | None = None,
  local_training: str = 'continuous',
  error_feedback: bool = False,
  **server: Any,
) -> Algorithm:
  """AsynFLC (eq. 7) uploading ``C(Delta)`` (a setting None: the compressor's default); with
  ``error_feedback``, AsynFLC-EF (Alg. 1, eqs. 8-10)."""
  given = {'fraction': fraction, 'bits': bits, 'scaled': scaled}
  comp = compression.make(compressor, **{k: v for k, v in given.items() if v is not None})
  name = 'asynflc_ef' if error_feedback else 'asynflc'
  comp = compression.error_feedback(comp) if error_feedback else comp
  return _algorithm(name, client_lr, num_clients, local_training, comp, **server)


COMPRESSOR = dict(
  context=('num_clients',),
  uses=(asynfl_server,),
  rules=(checks.Rule('compressor', _takes_only_its_own),),
  compressor=checks.choice(compression.names()),
  **COMPRESSORS.shared,
  **OPTIONS,
)
asynflc = ALGORITHMS.register('asynflc', _asynflc, fixed={'error_feedback': False}, **COMPRESSOR)
asynflc_ef = ALGORITHMS.register(
  'asynflc_ef', _asynflc, fixed={'error_feedback': True}, **COMPRESSOR
)
