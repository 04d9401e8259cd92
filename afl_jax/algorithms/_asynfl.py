"""AsynFL, AsynFLC and AsynFLC-EF (Yang, Hou, Wu, eqs. (2)-(5), (7), Alg. 1 eqs. (8)-(10));
continuous training accepts only the schedules whose starts it implies
(docs/algorithms/asynfl.md)."""

from __future__ import annotations

import numpy as np
import optax

from afl_jax import clients, compression, servers
from afl_jax.algorithms.registry import register
from afl_jax.core import checks
from afl_jax.core.types import Algorithm, ServerRule
from afl_jax.schedules.schedule import Schedule, ScheduleError

LOCAL_TRAINING = ('continuous', 'per_job')
OPTIONS = {'local_training': checks.choice(LOCAL_TRAINING)}
# AsynFLC's compressor: its name and parameters (ranges declared with the compressors).
COMPRESSOR = {'compressor': checks.choice(sorted(compression.NAMES)), **compression.PARAMS}


@checks.validated()
def asynfl_server(
  server_lr: float,
  *,
  normalizer: str = 'clients',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """Eq. (5)/(7)/(10); n = ``num_clients``, or when None the width of the arrival axis (``prepare``
  sets the run's N)."""
  if num_clients is None and normalizer == 'clients':
    plain = servers.optimizer_server(optax.sgd(server_lr), weighting=weighting)

    def update(state, messages, arrivals, key):
      width = arrivals.mask.shape[0]  # static: n = M when no run says otherwise
      return asynfl_server(
        server_lr, normalizer=normalizer, num_clients=width, weighting=weighting
      ).update(state, messages, arrivals, key)

    return ServerRule(plain.init, update)
  return servers.optimizer_server(
    optax.sgd(server_lr), normalizer=normalizer, num_clients=num_clients, weighting=weighting
  )


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
    raise ScheduleError(
      f'{name}: num_clients={num_clients} does not match this run, whose schedule has '
      f'{schedule.num_clients} clients; n of eq. (5) is the number of clients.'
    )
  if not continuous:
    return
  implied = continuous_starts(schedule)
  bad = schedule.mask & (implied != schedule.start_step)
  if bad.any():
    t, j = (int(v) for v in np.argwhere(bad)[0])
    raise ScheduleError(
      f"{name} with local_training='continuous' trains every client every round and "
      'restarts it from the global model only when it reports (eq. 4), so an arrival '
      "starts from the step after the client's previous report; but client "
      f'{int(schedule.client_ids[t, j])} arriving at step {t} has start_step='
      f'{int(schedule.start_step[t, j])}, not {int(implied[t, j])}. Use a schedule '
      "built for continuous training (schedules.waiting_windows) or local_training='per_job'."
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
      f"{name} with local_training='continuous' runs each client's K every round "
      f'(eq. 2), but client {i} has local_steps from {int(low[i])} to {int(high[i])} '
      "across its arrivals; give each client one K or use local_training='per_job'."
    )


def _algorithm(
  name: str,
  client_lr: float,
  server_lr: float,
  num_clients: int | None,
  normalizer: str,
  local_training: str,
  compressor: compression.Compressor | None = None,
  weighting: str = 'uniform',
) -> Algorithm:
  continuous = local_training == 'continuous'
  server = asynfl_server(
    server_lr,
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )

  def prepare(alg: Algorithm, schedule: Schedule) -> Algorithm:
    runs = schedule if isinstance(schedule, list | tuple) else [schedule]
    for one in runs:
      check_schedule(one, num_clients=num_clients, continuous=continuous, name=name)
    if num_clients is not None or normalizer != 'clients':
      return alg
    n = {one.num_clients for one in runs}
    if len(n) != 1:
      raise ScheduleError(f'{name}: the schedules have different client counts {sorted(n)}.')
    (n,) = n  # eq. (5)'s n is the run's N
    return alg._replace(
      server=asynfl_server(server_lr, normalizer=normalizer, num_clients=n, weighting=weighting)
    )

  if continuous:
    client, regime = clients.always_on_sgd(client_lr), 'always_on'
  else:
    client, regime = clients.local_sgd(client_lr), 'per_job'
  return Algorithm(name, client, server, compressor, regime=regime, prepare=prepare)


@register('asynfl', context=('num_clients',), uses=(asynfl_server,), **OPTIONS)
def asynfl(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  num_clients: int | None = None,
  normalizer: str = 'clients',
  local_training: str = 'continuous',
  weighting: str = 'uniform',
) -> Algorithm:
  """AsynFL (eqs. 2-5); ``local_training`` 'continuous' (eq. 4) or 'per_job'."""
  return _algorithm(
    'asynfl', client_lr, server_lr, num_clients, normalizer, local_training, weighting=weighting
  )  # noqa: E501


def _compressed(name, error_feedback, compressor, fraction, bits, scaled, **rest) -> Algorithm:
  params = {'fraction': fraction, 'bits': bits, 'scaled': scaled}
  given = {k: v for k, v in params.items() if v is not None}
  stray = sorted(set(given) - set(compression.COMPRESSORS.settings(compressor)))
  if stray:
    raise ValueError(
      f'compressor {compressor!r} takes no {stray} (it takes '
      f'{sorted(compression.COMPRESSORS.settings(compressor))}).'
    )
  comp = compression.get(compressor, error_feedback=error_feedback, **given)
  return _algorithm(name, compressor=comp, **rest)


_COMPRESSED = dict(context=('num_clients',), uses=(asynfl_server,), **COMPRESSOR, **OPTIONS)


@register('asynflc', **_COMPRESSED)
def asynflc(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  num_clients: int | None = None,
  compressor: str = 'top_k',
  fraction: float | None = None,
  bits: int | None = None,
  scaled: bool | None = None,
  normalizer: str = 'clients',
  local_training: str = 'continuous',
  weighting: str = 'uniform',
) -> Algorithm:
  """AsynFLC (eq. 7): AsynFL uploading ``C(Delta)`` (``fraction``, ``bits``, ``scaled`` None: the
  compressor's default)."""
  return _compressed('asynflc', False, **locals())


@register('asynflc_ef', **_COMPRESSED)
def asynflc_ef(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  num_clients: int | None = None,
  compressor: str = 'top_k',
  fraction: float | None = None,
  bits: int | None = None,
  scaled: bool | None = None,
  normalizer: str = 'clients',
  local_training: str = 'continuous',
  weighting: str = 'uniform',
) -> Algorithm:
  """AsynFLC-EF (Alg. 1, eqs. 8-10): AsynFLC with error feedback around ``compressor``."""
  return _compressed('asynflc_ef', True, **locals())
