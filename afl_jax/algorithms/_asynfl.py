"""AsynFL, AsynFLC and AsynFLC-EF.

Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated Learning with
Gradient Compression for Non-Convex Optimization" (IEEE):

* AsynFL (Sec. III-A, eqs. 2-5): the always-on client of eqs. 2-4
  (:func:`afl_jax.clients.always_on_sgd`) and the server step of eq. (5),
  :func:`afl_jax.servers.optimizer_server` with ``optax.sgd(eta_g)`` and
  ``normalizer='clients'``;
* AsynFLC (Sec. III-B, eq. 7): AsynFL whose uploads pass through a compressor ``C``
  (:mod:`afl_jax.compression`);
* AsynFLC-EF (Sec. III-C, eqs. 8-10, Algorithm 1): AsynFLC with error feedback.

Equations in (docs/algorithms/asynfl.md, "Equations as implemented"); the options
``normalizer='arrivals'``, ``local_training='per_job'`` and ``weighting``, and why
continuous training honours only schedules whose starts it implies (rejected on the
host by :func:`check_schedule`, through ``Algorithm.prepare``), in
(docs/algorithms/asynfl.md, "Readings taken") and (docs/algorithms/asynfl.md,
"How it meets the engine"). Hyperparameters: ``client_lr`` = eta, ``server_lr`` =
eta_g, ``num_clients`` = n.
"""

from __future__ import annotations

import numpy as np
import optax

from afl_jax import clients, compression, servers
from afl_jax.algorithms.registry import Variant, register, register_family
from afl_jax.core import checks
from afl_jax.core.types import Algorithm, ServerRule
from afl_jax.schedules.schedule import Schedule, ScheduleError
from afl_jax.servers.pseudo_gradient import NORMALIZERS, check_normalizer

LOCAL_TRAINING = ('continuous', 'per_job')

# AsynFLC's hyperparameters naming its compressor and the compressor's parameters: what
# each accepts is declared with the compressors (afl_jax.compression.PARAMS).
_COMPRESSOR_SPECS = {'compressor': checks.choice(sorted(compression.NAMES)), **compression.PARAMS}

# The options every AsynFL variant takes (docs/algorithms/asynfl.md).
OPTIONS = {
  'normalizer': checks.choice(NORMALIZERS),
  'local_training': checks.choice(LOCAL_TRAINING),
}


def _check_num_clients(num_clients: int | None) -> None:
  if num_clients is None:
    return
  if isinstance(num_clients, bool) or int(num_clients) != num_clients or num_clients < 1:
    raise ValueError(f'num_clients must be an integer >= 1 (or None); got {num_clients!r}.')


def build_compressor(
  compressor: str,
  *,
  fraction: float | None = None,
  bits: int | None = None,
  scaled: bool | None = None,
  error_feedback: bool = False,
) -> compression.Compressor:
  """The compressor ``compressor`` with its parameters (None = the paper's default).

  Args:
    compressor: one of ``afl_jax.compression.NAMES``.
    fraction: k/d for 'top_k' and 'top_k_qsgd' (default 0.03).
    bits: b, bits per coordinate including the sign, for 'qsgd' and 'top_k_qsgd'
      (default 4).
    scaled: for 'sign': multiply by ||x||_1 / d; for 'top_k_qsgd': divide by
      1 + beta_{k,s} (Basu et al.), the contraction whose gamma the paper quotes
      (default False for both, as the operators are defined in the paper).
    error_feedback: wrap it in error feedback (AsynFLC-EF, eqs. 8-9).

  Raises:
    ValueError: unknown compressor, or a parameter given to a compressor that does
      not take it, or an invalid parameter value.
  """
  if compressor not in compression.NAMES:
    raise ValueError(f'compressor must be one of {sorted(compression.NAMES)}; got {compressor!r}.')
  given = {
    k: v for k, v in dict(fraction=fraction, bits=bits, scaled=scaled).items() if v is not None
  }
  takes = compression.defaults(compressor)
  stray = sorted(set(given) - set(takes))
  if stray:
    raise ValueError(
      f'compressor {compressor!r} takes no {stray} (it takes {sorted(takes)}); '
      f'got {", ".join(f"{k}={given[k]!r}" for k in stray)}.'
    )
  return compression.get(compressor, error_feedback=error_feedback, **{**takes, **given})


def asynfl_server(
  server_lr: float,
  *,
  normalizer: str = 'clients',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """eq. (5)/(7)/(10): ``x <- x - eta_g * (1/n) sum_{S_t} Delta`` (our sign).

  Only the valid arrivals (``arrivals.mask``) count, never the engine's padded slots
  (docs/algorithms/asynfl.md, "How it meets the engine"). Whether ``num_clients`` is
  the run's n is checked on the host before any compute (:func:`check_schedule`).

  ``num_clients=None`` with ``normalizer='clients'``: n is the width M of the
  arrival axis the rule is called with (every slot one client, as in a synchronous
  round); the algorithm's ``prepare`` replaces it with the run's n (the schedule's N).

  Args:
    server_lr: eta_g.
    normalizer: 'clients' divides by n (as written), 'arrivals' by |S_t|.
    num_clients: n (None: the arrival axis's width, see above).
    weighting: 'uniform' (as written) or 'examples': client i's Delta weighted by
      ``n_i / sum_j n_j`` in place of ``1/n`` (``n_i / sum_{S_t} n_j`` in place of
      ``1/|S_t|``), :mod:`afl_jax.servers.weighting`.
  """
  checks.positive('server_lr', server_lr)
  _check_num_clients(num_clients)
  if num_clients is None and normalizer == 'clients':
    plain = servers.optimizer_server(optax.sgd(server_lr), weighting=weighting)

    def update(state, messages, arrivals, key):
      width = arrivals.mask.shape[0]  # static: n = M when no run says otherwise
      return asynfl_server(
        server_lr, normalizer=normalizer, num_clients=width, weighting=weighting
      ).update(state, messages, arrivals, key)

    return ServerRule(plain.init, update)
  check_normalizer(normalizer, num_clients)
  return servers.optimizer_server(
    optax.sgd(server_lr),
    normalizer=normalizer,
    num_clients=num_clients,
    weighting=weighting,
  )


def continuous_starts(schedule: Schedule) -> np.ndarray:
  """int32[T, M]: the start step continuous training implies for every arrival.

  Eq. (4) / Alg. 1 line 14: a client that reports at step t downloads x_{t+1}, so
  its next report is relative to version t + 1; before its first report it is
  relative to x_0. Padding gets the schedule's own (canonical) start.
  """
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
  """Host checks of a schedule against AsynFL, before any compute.

  Raises:
    ScheduleError: ``num_clients`` is not the schedule's N; or, with continuous
      training, an arrival whose ``start_step`` differs from the one eq. (4) implies
      (:func:`continuous_starts`), or a client whose ``local_steps`` change between
      arrivals (eq. 2 runs the same K every round).
  """
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
  checks.one_of('local_training', local_training, LOCAL_TRAINING)
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


@register(
  'asynfl',
  context=('num_clients',),
  **OPTIONS,
)
def asynfl(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  num_clients: int | None = None,
  normalizer: str = 'clients',
  local_training: str = 'continuous',
  weighting: str = 'uniform',
) -> Algorithm:
  """AsynFL (eqs. 2-5): eta = client_lr, eta_g = server_lr, n = num_clients.

  Args:
    client_lr: eta, the local SGD step (eq. 2).
    server_lr: eta_g, the global step (eq. 5).
    num_clients: n, the divisor of eq. (5). None (the default): the run's N, taken
      from the schedule by ``Algorithm.prepare``; a rule called alone, outside a
      run, divides by the width of the arrival axis it is given (:func:`asynfl_server`).
    normalizer: 'clients' (divide by n, as written) or 'arrivals' (divide by |S_t|).
    local_training: 'continuous' (eq. 4: clients keep training between reports,
      ``regime='always_on'``) or 'per_job' (FedBuff-style: K steps per job from the
      version the client started from). Continuous training rejects, before any
      compute, a schedule whose start steps are not the step after each client's
      previous report (:func:`check_schedule`).
    weighting: 'uniform' (eq. 5 as written) or 'examples' (by the example counts the
      messages carry).
  """
  return _algorithm(
    'asynfl',
    client_lr,
    server_lr,
    num_clients,
    normalizer,
    local_training,
    weighting=weighting,
  )


def _compressed(
  name: str,
  error_feedback: bool,
  client_lr,
  server_lr,
  num_clients,
  compressor,
  fraction,
  bits,
  scaled,
  normalizer,
  local_training,
  weighting,
) -> Algorithm:
  comp = build_compressor(
    compressor, fraction=fraction, bits=bits, scaled=scaled, error_feedback=error_feedback
  )
  return _algorithm(
    name,
    client_lr,
    server_lr,
    num_clients,
    normalizer,
    local_training,
    compressor=comp,
    weighting=weighting,
  )


# AsynFLC's and AsynFLC-EF's hyperparameters with their defaults, in signature order.
COMPRESSED_PARAMS = {
  'client_lr': 0.01,
  'server_lr': 1.0,
  'num_clients': None,
  'compressor': 'top_k',
  'fraction': None,
  'bits': None,
  'scaled': None,
  'normalizer': 'clients',
  'local_training': 'continuous',
  'weighting': 'uniform',
}

# The registered factories, by name (what ``algorithms.get(name)`` builds with).
COMPRESSED = register_family(
  _compressed,
  COMPRESSED_PARAMS,
  {
    'asynflc': Variant(
      """AsynFLC (eq. 7): AsynFL whose uploads are ``C(Delta)``, no error feedback.

``compressor`` is one of 'identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd';
``fraction`` (k/d), ``bits`` (b) and ``scaled`` are its parameters (None = the
paper's default, :func:`afl_jax.compression.defaults`); the rest as in :func:`asynfl`.
""",
      fixed={'error_feedback': False},
    ),
    'asynflc_ef': Variant(
      """AsynFLC-EF (Alg. 1, eqs. 8-10): AsynFLC with error feedback around ``compressor``.

Same hyperparameters as :func:`asynflc`.
""",
      fixed={'error_feedback': True},
    ),
  },
  context=('num_clients',),
  specs={**_COMPRESSOR_SPECS, **OPTIONS},
)
