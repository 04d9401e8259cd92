"""FedFa (Xu, Zhang, Di, Liu, Alharthi, Cao, "FedFa: A Fully Asynchronous Training Paradigm
for Federated Learning", IJCAI 2024): local-SGD clients (Alg. 2, Q = the schedule's local
steps) and the sliding-window server (Alg. 1), FedFa-Param (eq. 3) or FedFa-Delta (eq. 4),
alone or with FedProx's client or FedNova's normalization (Sec. 5.3, Table 6). eta_l =
``client_lr``, eta_g = ``server_lr`` (Delta only), K = ``window_size``, ``mu`` FedProx's;
the window's options are the server's (docs/algorithms/fedfa.md).
"""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import register
from afl_jax.core.types import Algorithm


def _fedfa(name, mode, client_lr, *, server_lr=1.0, mu=None, nova=False, **window) -> Algorithm:
  server = servers.fedfa(mode=mode, server_lr=server_lr, nova=nova, **window)
  client = clients.local_sgd(client_lr) if mu is None else clients.prox_sgd(client_lr, mu)
  return Algorithm(name, client, server)


@register('fedfa_param', uses=(servers.fedfa,))
def fedfa_param(
  client_lr=0.01, window_size=5, aggregate_on_fill=False, sliding=True, weighting='uniform'
) -> Algorithm:
  """FedFa-Param: the model is the mean of the K windowed client models."""
  return _fedfa('fedfa_param', 'param', **locals())


@register('fedfa_delta', uses=(servers.fedfa,))
def fedfa_delta(
  client_lr=0.01,
  server_lr=1.0,
  window_size=5,
  aggregate_on_fill=False,
  sliding=True,
  weighting='uniform',
) -> Algorithm:
  """FedFa-Delta: ``x <- x - eta_g mean of the K windowed deltas``."""
  return _fedfa('fedfa_delta', 'delta', **locals())


@register('fedfa_param_prox', uses=(servers.fedfa,))
def fedfa_param_prox(
  client_lr=0.01, mu=0.01, window_size=5, aggregate_on_fill=False, sliding=True, weighting='uniform'
) -> Algorithm:
  """FedFa-Param with FedProx's client."""
  return _fedfa('fedfa_param_prox', 'param', **locals())


@register('fedfa_delta_prox', uses=(servers.fedfa,))
def fedfa_delta_prox(
  client_lr=0.01,
  server_lr=1.0,
  mu=0.01,
  window_size=5,
  aggregate_on_fill=False,
  sliding=True,
  weighting='uniform',
) -> Algorithm:
  """FedFa-Delta with FedProx's client (Table 6, "Fedprox w/")."""
  return _fedfa('fedfa_delta_prox', 'delta', **locals())


@register('fedfa_param_nova', uses=(servers.fedfa,))
def fedfa_param_nova(
  client_lr=0.01, window_size=5, aggregate_on_fill=False, sliding=True, weighting='uniform'
) -> Algorithm:
  """FedFa-Param with FedNova: model = ``mean(x_start_k) - tau_eff mean(Delta_k / tau_k)``."""
  return _fedfa('fedfa_param_nova', 'param', nova=True, **locals())


@register('fedfa_delta_nova', uses=(servers.fedfa,))
def fedfa_delta_nova(
  client_lr=0.01,
  server_lr=1.0,
  window_size=5,
  aggregate_on_fill=False,
  sliding=True,
  weighting='uniform',
) -> Algorithm:
  """FedFa-Delta with FedNova (Table 6, "Fednova w/"): ``tau_eff`` over the window."""
  return _fedfa('fedfa_delta_nova', 'delta', nova=True, **locals())
