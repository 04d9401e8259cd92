"""FedFa (Xu et al., IJCAI 2024): the sliding-window server (Alg. 1, eqs. (3)-(4)) with local-SGD,
FedProx or FedNova clients (Sec. 5.3, Table 6) (docs/algorithms/fedfa.md)."""

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
  return _fedfa('fedfa_delta', 'delta', **locals())


@register('fedfa_param_prox', uses=(servers.fedfa,))
def fedfa_param_prox(
  client_lr=0.01, mu=0.01, window_size=5, aggregate_on_fill=False, sliding=True, weighting='uniform'
) -> Algorithm:
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
  return _fedfa('fedfa_delta_prox', 'delta', **locals())


@register('fedfa_param_nova', uses=(servers.fedfa,))
def fedfa_param_nova(
  client_lr=0.01, window_size=5, aggregate_on_fill=False, sliding=True, weighting='uniform'
) -> Algorithm:
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
  return _fedfa('fedfa_delta_nova', 'delta', nova=True, **locals())
