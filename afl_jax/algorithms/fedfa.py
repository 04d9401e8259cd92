"""FedFa and its FedProx / FedNova extensions.

Xu, Zhang, Di, Liu, Alharthi, Cao, "FedFa: A Fully Asynchronous Training Paradigm
for Federated Learning", IJCAI 2024.

* Client, Alg. 2: Q ordinary local SGD steps from the broadcast (Alg. 2 as printed
  is off by one; we run Q steps ``y_q = y_{q-1} - eta_l g(y_{q-1})``, q = 1..Q), with
  Q the schedule's ``local_steps``.
* Server, Alg. 1: a sliding window of the last K arrivals (``afl_jax.servers.fedfa``).
  FedFa-Param aggregates with eq. (3) (mean of the K client models), FedFa-Delta
  with eq. (4) (``x <- x + eta_g/K * sum of the K deltas``).
* Sec. 5.3 "Combined with Synchronous Optimization Methods", Table 6: FedProx
  (proximal client) and FedNova (normalized averaging, ``tau_eff`` over the window)
  inside FedFa. The paper runs them with FedFa-Delta; the Param variants are built
  the same way.

Run with one arrival per server step (``afl_jax.schedules.fully_async``); several
arrivals in one step are taken one after another in slot order.

Hyperparameters: ``client_lr`` = eta_l; ``server_lr`` = eta_g of eq. (4) (Delta only,
default 1 as eq. (4) is written); ``window_size`` = K; ``mu`` = FedProx's mu;
``aggregate_on_fill`` and ``sliding`` are the options of docs/algorithms/fedfa.md;
``weighting`` 'uniform' (the paper's 1/K) or 'examples' (window items weighted by
their clients' example counts, which travel with the messages).
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.prox_nova import with_prox
from afl_jax.algorithms.registry import register
from afl_jax.clients.prox import check_client_lr
from afl_jax.core import checks
from afl_jax.core.types import Algorithm

# The window of every FedFa variant (K, when it aggregates, sliding or tumbling).
WINDOW = {
  'window_size': checks.integer(1),
  'aggregate_on_fill': checks.boolean(),
  'sliding': checks.boolean(),
}


def _fedfa(
  name: str,
  mode: str,
  client_lr: float,
  window_size: int,
  server_lr: float,
  aggregate_on_fill: bool,
  sliding: bool,
  nova: bool = False,
  weighting: str = 'uniform',
) -> Algorithm:
  check_client_lr(client_lr)
  server = servers.fedfa_server(
    window_size,
    mode,
    server_lr,
    aggregate_on_fill=aggregate_on_fill,
    sliding=sliding,
    message_scales=servers.nova_scales if nova else None,
    weighting=weighting,
  )
  return Algorithm(name, clients.local_sgd(client_lr), server)


@register('fedfa_param', hparams=WINDOW)
def fedfa_param(
  client_lr: float = 0.01,
  window_size: int = 5,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedFa-Param: local SGD clients; the model is the mean of the K windowed models."""
  return _fedfa(
    'fedfa_param',
    'param',
    client_lr,
    window_size,
    1.0,
    aggregate_on_fill,
    sliding,
    weighting=weighting,
  )


@register('fedfa_delta', hparams=WINDOW)
def fedfa_delta(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  window_size: int = 5,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedFa-Delta: local SGD clients; ``x <- x - eta_g * mean of the K windowed deltas``."""
  return _fedfa(
    'fedfa_delta',
    'delta',
    client_lr,
    window_size,
    server_lr,
    aggregate_on_fill,
    sliding,
    weighting=weighting,
  )


@register('fedfa_param_prox', hparams=WINDOW)
def fedfa_param_prox(
  client_lr: float = 0.01,
  mu: float = 0.01,
  window_size: int = 5,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedFa-Param with FedProx's client (mu)."""
  return with_prox(
    fedfa_param(client_lr, window_size, aggregate_on_fill, sliding, weighting),
    'fedfa_param_prox',
    client_lr,
    mu,
  )


@register('fedfa_delta_prox', hparams=WINDOW)
def fedfa_delta_prox(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  mu: float = 0.01,
  window_size: int = 5,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedFa-Delta with FedProx's client (mu): Table 6, "Fedprox w/"."""
  return with_prox(
    fedfa_delta(client_lr, server_lr, window_size, aggregate_on_fill, sliding, weighting),
    'fedfa_delta_prox',
    client_lr,
    mu,
  )


@register('fedfa_param_nova', hparams=WINDOW)
def fedfa_param_nova(
  client_lr: float = 0.01,
  window_size: int = 5,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedFa-Param with FedNova: model = ``mean(x_start_k) - tau_eff mean(Delta_k / tau_k)``."""
  return _fedfa(
    'fedfa_param_nova',
    'param',
    client_lr,
    window_size,
    1.0,
    aggregate_on_fill,
    sliding,
    nova=True,
    weighting=weighting,
  )


@register('fedfa_delta_nova', hparams=WINDOW)
def fedfa_delta_nova(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  window_size: int = 5,
  aggregate_on_fill: bool = False,
  sliding: bool = True,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedFa-Delta with FedNova (Table 6, "Fednova w/"): ``tau_eff`` over the window."""
  return _fedfa(
    'fedfa_delta_nova',
    'delta',
    client_lr,
    window_size,
    server_lr,
    aggregate_on_fill,
    sliding,
    nova=True,
    weighting=weighting,
  )
