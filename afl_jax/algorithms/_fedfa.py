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
``aggregate_on_fill`` and ``sliding`` are the options of (docs/algorithms/fedfa.md,
"Readings taken");
``weighting`` 'uniform' (the paper's 1/K) or 'examples' (window items weighted by
their clients' example counts, which travel with the messages).
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import Variant, register_family
from afl_jax.core import checks
from afl_jax.core.types import Algorithm

# The window of every FedFa variant (K, when it aggregates, sliding or tumbling).
WINDOW = {
  'window_size': checks.integer(1),
  'aggregate_on_fill': checks.boolean(),
  'sliding': checks.boolean(),
}

# Every FedFa variant's hyperparameters with their defaults, in signature order:
# Param variants take no ``server_lr`` (eq. (3) has no server step), and only the
# FedProx variants take ``mu``.
PARAMS = {
  'client_lr': 0.01,
  'server_lr': 1.0,
  'mu': 0.01,
  'window_size': 5,
  'aggregate_on_fill': False,
  'sliding': True,
  'weighting': 'uniform',
}


def _fedfa(
  name: str,
  mode: str,
  client_lr: float,
  window_size: int,
  aggregate_on_fill: bool,
  sliding: bool,
  weighting: str,
  server_lr: float = 1.0,
  prox: bool = False,
  mu: float = 0.0,
  nova: bool = False,
) -> Algorithm:
  server = servers.fedfa_server(
    window_size,
    mode,
    server_lr,
    aggregate_on_fill=aggregate_on_fill,
    sliding=sliding,
    message_scales=servers.nova_scales if nova else None,
    weighting=weighting,
  )
  client = clients.prox_sgd(client_lr, mu) if prox else clients.local_sgd(client_lr)
  return Algorithm(name, client, server)


def _variant(doc: str, mode: str, extension: str = '') -> Variant:
  """A FedFa variant: ``mode`` 'param' or 'delta'; ``extension`` '', 'prox' or 'nova'."""
  omit = ('server_lr',) * (mode == 'param') + ('mu',) * (extension != 'prox')
  fixed = {'mode': mode, 'prox': extension == 'prox', 'nova': extension == 'nova'}
  return Variant(doc, omit, fixed)


# The registered factories, by name (what ``algorithms.get(name)`` builds with).
FEDFA = register_family(
  _fedfa,
  PARAMS,
  {
    'fedfa_param': _variant(
      'FedFa-Param: local SGD clients; the model is the mean of the K windowed models.', 'param'
    ),
    'fedfa_delta': _variant(
      'FedFa-Delta: local SGD clients; ``x <- x - eta_g * mean of the K windowed deltas``.',
      'delta',
    ),
    'fedfa_param_prox': _variant("FedFa-Param with FedProx's client (mu).", 'param', 'prox'),
    'fedfa_delta_prox': _variant(
      'FedFa-Delta with FedProx\'s client (mu): Table 6, "Fedprox w/".', 'delta', 'prox'
    ),
    'fedfa_param_nova': _variant(
      'FedFa-Param with FedNova: model = ``mean(x_start_k) - tau_eff mean(Delta_k / tau_k)``.',
      'param',
      'nova',
    ),
    'fedfa_delta_nova': _variant(
      'FedFa-Delta with FedNova (Table 6, "Fednova w/"): ``tau_eff`` over the window.',
      'delta',
      'nova',
    ),
  },
  specs=WINDOW,
)
