"""CA2FL (Wang et al., ICLR 2024, Alg. 1) and FADAS (Wang et al., ICML 2024, Alg. 1) with local-SGD
clients; FADAS's defaults are the authors' commands (docs/algorithms/ca2fl_fadas.md)."""

from __future__ import annotations

from afl_jax import clients, servers
from afl_jax.algorithms.registry import joint_init, register
from afl_jax.core.types import Algorithm
from afl_jax.servers._ca2fl import init_state


@register('ca2fl')
def ca2fl(client_lr: float = 0.01, server_lr: float = 1.0, weighting: str = 'uniform'):
  client = clients.local_sgd(client_lr)
  init = joint_init(client, lambda params, tasks, _: init_state(params, tasks.client_id.size))
  return Algorithm('ca2fl', client, servers.ca2fl(server_lr, weighting=weighting), init=init)


@register('fadas', uses=(servers.fadas,))
def fadas(
  client_lr: float = 0.1,
  server_lr: float = 1e-4,
  beta1: float = 0.9,
  beta2: float = 0.99,
  epsilon: float = 1e-8,
  delay_adaptive: bool = True,
  tau_c: int = 1,
  delay_rule: str = 'min_inverse',
  bias_correction: bool = False,
  weighting: str = 'uniform',
) -> Algorithm:
  server = servers.fadas(
    server_lr,
    beta1,
    beta2,
    epsilon,
    delay_adaptive=delay_adaptive,
    tau_c=tau_c,
    delay_rule=delay_rule,
    bias_correction=bias_correction,
    weighting=weighting,
  )
  return Algorithm('fadas', clients.local_sgd(client_lr), server)
