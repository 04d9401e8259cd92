"""AsynFL, AsynFLC and AsynFLC-EF.

Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated Learning with
Gradient Compression for Non-Convex Optimization" (IEEE).

* AsynFL (Sec. III-A, eqs. 2-5): every client trains K local SGD steps every
  round on its own local model (eq. 2, :func:`afl_jax.clients.always_on_sgd`);
  the clients S_t that report at round t send ``Delta_t^{(i)}`` relative to the
  global model they last synchronized to (eq. 3) and restart from ``x_{t+1}``,
  the others keep training (eq. 4); the server steps

  .. math::  x_{t+1} = x_t + \\frac{\\eta_g}{n} \\sum_{i \\in S_t} \\Delta_t^{(i)}  \\quad (5)

  i.e. :func:`afl_jax.servers.optimizer_server` with ``optax.sgd(eta_g)`` and
  ``normalizer='clients'`` (our Delta is the negative of the paper's).
* AsynFLC (Sec. III-B, eq. 7): AsynFL whose uploads pass through a compressor
  ``C`` (Top-k, Sign, QSGD, Top-k + QSGD; :mod:`afl_jax.compression`).
* AsynFLC-EF (Sec. III-C, eqs. 8-10, Algorithm 1): AsynFLC with error feedback,
  ``Deltahat = C(Delta + e)``, ``e <- e + Delta - Deltahat``, ``e`` frozen while
  the client is absent (the engine writes compressor state back only for
  reporting clients).

All three are compositions: one client rule, one server rule, and an optional
``Algorithm.compressor``. Options (SPEC_NOTES, "AsynFL"): ``normalizer='arrivals'``
divides by |S_t| instead of n; ``local_training='per_job'`` runs FedBuff-style jobs
(K steps from the version each client started from, :func:`afl_jax.clients.local_sgd`)
instead of continuous training.

Hyperparameters vs the paper: ``client_lr`` = eta (local learning rate),
``server_lr`` = eta_g (global learning rate), ``num_clients`` = n.
"""

from __future__ import annotations

import optax

from afl_jax import clients, compression, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm, Arrivals, ServerRule
from afl_jax.servers.pseudo_gradient import check_normalizer

LOCAL_TRAINING = ('continuous', 'per_job')

# The compressor parameters each compressor takes, with the paper's defaults
# (Fig. 1: "top3" = k/d 0.03, "Q4b" = QSGD with b = 4; Sign is unscaled, Sec. III-B).
COMPRESSOR_DEFAULTS: dict[str, dict[str, object]] = {
  'identity': {},
  'top_k': {'fraction': 0.03},
  'sign': {'scaled': False},
  'qsgd': {'bits': 4},
  'top_k_qsgd': {'fraction': 0.03, 'bits': 4, 'scaled': False},
}


def _check_positive(name: str, value) -> None:
  if callable(value):  # an optax schedule
    return
  if isinstance(value, bool) or not float(value) > 0:
    raise ValueError(f'{name} must be > 0 (or an optax schedule); got {value!r}.')


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
  if compressor not in COMPRESSOR_DEFAULTS:
    raise ValueError(
      f'compressor must be one of {sorted(COMPRESSOR_DEFAULTS)}; got {compressor!r}.'
    )
  given = {
    k: v for k, v in dict(fraction=fraction, bits=bits, scaled=scaled).items() if v is not None
  }
  takes = COMPRESSOR_DEFAULTS[compressor]
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
  always_on: bool = False,
) -> ServerRule:
  """eq. (5)/(7)/(10): ``x <- x - eta_g * (1/n) sum_{S_t} Delta`` (our sign).

  Args:
    server_lr: eta_g.
    normalizer: 'clients' divides by n (as written), 'arrivals' by |S_t|.
    num_clients: n; required with ``normalizer='clients'``. Checked against the
      run when traced: no step can stack more than n messages.
    always_on: the run uses ``regime='always_on'``, which stacks exactly n
      messages per step (one per client); a different count is an error.
  """
  _check_positive('server_lr', server_lr)
  _check_num_clients(num_clients)
  check_normalizer(normalizer, num_clients)
  inner = servers.optimizer_server(
    optax.sgd(server_lr), normalizer=normalizer, num_clients=num_clients
  )

  def update(state, messages, arrivals: Arrivals, key):
    m = arrivals.mask.shape[0]
    if num_clients is not None and (m > num_clients or (always_on and m != num_clients)):
      raise ValueError(
        f'num_clients={num_clients} does not match this run, which stacks {m} '
        'messages per server step; set num_clients to the number of clients n.'
      )
    return inner.update(state, messages, arrivals, key)

  return inner._replace(update=update)


def _algorithm(
  name: str,
  client_lr: float,
  server_lr: float,
  num_clients: int | None,
  normalizer: str,
  local_training: str,
  compressor: compression.Compressor | None = None,
) -> Algorithm:
  _check_positive('client_lr', client_lr)
  if local_training not in LOCAL_TRAINING:
    raise ValueError(f'local_training must be one of {LOCAL_TRAINING}; got {local_training!r}.')
  continuous = local_training == 'continuous'
  server = asynfl_server(
    server_lr, normalizer=normalizer, num_clients=num_clients, always_on=continuous
  )
  if continuous:
    return Algorithm(name, clients.always_on_sgd(client_lr), server, compressor, regime='always_on')
  return Algorithm(name, clients.local_sgd(client_lr), server, compressor, regime='per_job')


@register('asynfl')
def asynfl(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  num_clients: int | None = None,
  normalizer: str = 'clients',
  local_training: str = 'continuous',
) -> Algorithm:
  """AsynFL (eqs. 2-5): eta = client_lr, eta_g = server_lr, n = num_clients.

  Args:
    client_lr: eta, the local SGD step (eq. 2).
    server_lr: eta_g, the global step (eq. 5).
    num_clients: n, the divisor of eq. (5); required with ``normalizer='clients'``.
    normalizer: 'clients' (divide by n, as written) or 'arrivals' (divide by |S_t|).
    local_training: 'continuous' (eq. 4: clients keep training between reports,
      ``regime='always_on'``) or 'per_job' (FedBuff-style: K steps per job from the
      version the client started from).
  """
  return _algorithm('asynfl', client_lr, server_lr, num_clients, normalizer, local_training)


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
) -> Algorithm:
  base = asynfl(client_lr, server_lr, num_clients, normalizer, local_training)
  comp = build_compressor(
    compressor, fraction=fraction, bits=bits, scaled=scaled, error_feedback=error_feedback
  )
  return base._replace(name=name, compressor=comp)


@register('asynflc')
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
) -> Algorithm:
  """AsynFLC (eq. 7): AsynFL whose uploads are ``C(Delta)``, no error feedback.

  ``compressor`` is one of 'identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd';
  ``fraction`` (k/d), ``bits`` (b) and ``scaled`` are its parameters (None = the
  paper's default, see :data:`COMPRESSOR_DEFAULTS`); the rest as in :func:`asynfl`.
  """
  return _compressed(
    'asynflc',
    False,
    client_lr,
    server_lr,
    num_clients,
    compressor,
    fraction,
    bits,
    scaled,
    normalizer,
    local_training,
  )


@register('asynflc_ef')
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
) -> Algorithm:
  """AsynFLC-EF (Alg. 1, eqs. 8-10): AsynFLC with error feedback around ``compressor``.

  Same hyperparameters as :func:`asynflc`.
  """
  return _compressed(
    'asynflc_ef',
    True,
    client_lr,
    server_lr,
    num_clients,
    compressor,
    fraction,
    bits,
    scaled,
    normalizer,
    local_training,
  )
