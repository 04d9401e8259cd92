"""FedProx and FedNova, as variants of FedAvg and FedBuff (and, in ``fedfa.py``, of FedFa).

* FedProx — Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in
  Heterogeneous Networks", MLSys 2020, Alg. 2: the client minimizes
  ``F_k(w) + mu/2 ||w - w^t||^2`` by local SGD (``afl_jax.clients.prox_sgd``); the
  server is unchanged.
* FedNova — Wang, Liu, Liang, Joshi, Poor, "Tackling the Objective Inconsistency
  Problem in Heterogeneous Federated Optimization", NeurIPS 2020, Sec. 5 with plain
  local SGD: ``x <- x - eta_g * tau_eff * mean_i(Delta_i / tau_i)``, ``tau_eff`` the
  mean local steps of the aggregated clients (``afl_jax.servers.nova``); the client
  is unchanged.

Both are *compositions*: :func:`with_prox` swaps an algorithm's client for the
proximal one, :func:`with_nova` puts FedNova's normalization in front of its server.
FedFa's window needs ``tau_eff`` over the window instead, see ``fedfa.py``.

Hyperparameters: ``client_lr`` = eta_l, ``server_lr`` = eta_g (FedBuff's server step),
``mu`` = FedProx's mu. Equations and readings: (docs/algorithms/fedfa.md, "Equations as
implemented"), (docs/algorithms/fedfa.md, "Readings taken").
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms import baselines
from afl_jax.algorithms.registry import Variant, register_family
from afl_jax.clients.sgd import ScalarOrSchedule
from afl_jax.core.types import Algorithm


def with_prox(algorithm: Algorithm, name: str, client_lr: ScalarOrSchedule, mu: float) -> Algorithm:
  """``algorithm`` with FedProx's client (eta_l = client_lr, proximal coefficient mu)."""
  return algorithm._replace(name=name, client=clients.prox_sgd(client_lr, mu))


def with_nova(algorithm: Algorithm, name: str, weighting: str = 'uniform') -> Algorithm:
  """``algorithm`` with FedNova's ``tau_eff / tau_i`` rescaling before its (averaging) server.

  ``weighting`` must be that of ``algorithm``'s server (FedNova's
  ``p_i`` enter both ``tau_eff`` and the mean).
  """
  server = servers.nova(algorithm.server, weighting=weighting)
  return algorithm._replace(name=name, server=server)


def _extended(
  name: str,
  base: str,
  extension: str,
  client_lr: float,
  weighting: str,
  server_lr: float = 1.0,
  mu: float = 0.0,
) -> Algorithm:
  """FedAvg or FedBuff (``base``) with FedProx's client or FedNova's server (``extension``)."""
  if base == 'fedbuff':
    algorithm = baselines.fedbuff(client_lr, server_lr, weighting)
  else:
    algorithm = baselines.fedavg(client_lr, weighting)
  if extension == 'prox':
    return with_prox(algorithm, name, client_lr, mu)
  return with_nova(algorithm, name, weighting)


# The hyperparameters of the four with their defaults, in signature order: only the
# FedBuff variants take ``server_lr``, only the FedProx variants ``mu``; the FedAvg
# variants weight by example counts, as the papers do.
PARAMS = {'client_lr': 0.01, 'server_lr': 1.0, 'mu': 0.01, 'weighting': 'uniform'}


def _variant(doc: str, base: str, extension: str) -> Variant:
  omit = ('server_lr',) * (base == 'fedavg') + ('mu',) * (extension != 'prox')
  defaults = {'weighting': 'examples'} if base == 'fedavg' else {}
  return Variant(doc, omit, {'base': base, 'extension': extension}, defaults)


# The registered factories, by name (what ``algorithms.get(name)`` builds with).
EXTENDED = register_family(
  _extended,
  PARAMS,
  {
    'fedprox': _variant(
      """FedProx = FedAvg's server + the proximal client: eta_l = client_lr, mu.

Li et al. weight by ``p_k = n_k / n`` like FedAvg (``weighting='examples'``, default).
""",
      'fedavg',
      'prox',
    ),
    'fedbuff_prox': _variant(
      'FedBuff with the proximal client: eta_l = client_lr, eta_g = server_lr, mu.',
      'fedbuff',
      'prox',
    ),
    'fednova': _variant(
      """FedNova = FedAvg with normalized averaging: ``x <- x - tau_eff * sum_i p_i Delta_i/tau_i``.

Wang et al. take ``p_i = n_i / n`` (``weighting='examples'``, default).
""",  # noqa: E501
      'fedavg',
      'nova',
    ),
    'fedbuff_nova': _variant(
      'FedBuff with normalized averaging: ``x <- x - eta_g tau_eff mean(Delta_i/tau_i)``.',
      'fedbuff',
      'nova',
    ),
  },
)
