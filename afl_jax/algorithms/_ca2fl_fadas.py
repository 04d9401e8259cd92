"""Baselines of the MasFL paper with local-SGD clients: CA2FL and FADAS.

* CA2FL -- Wang, Cao, Wu, Chen, Chen, "Tackling the Data Heterogeneity in
  Asynchronous Federated Learning with Cached Update Calibration", ICLR 2024,
  Algorithm 1 (:mod:`afl_jax.servers.ca2fl`). eta_l -> ``client_lr``, eta (global)
  -> ``server_lr``.
* FADAS -- Wang, Wang, Lu, Chen, "FADAS: Towards Federated Adaptive Asynchronous
  Optimization", ICML 2024, Algorithm 1 with the delay-adaptive learning rate
  (:mod:`afl_jax.servers.fadas`). eta_l -> ``client_lr``, eta (global) -> ``server_lr``,
  beta_1, beta_2, epsilon, tau_c as in the paper. Defaults follow the authors'
  released commands (local 0.1, global 1e-4, threshold tau_c = 1).

Clients run K local SGD steps and send ``Delta = x_start - x_K`` (the library's sign;
the papers send ``x_K - x_start``). Equations and readings: (docs/algorithms/ca2fl_fadas.md,
"CA2FL (equations as implemented)"), (docs/algorithms/ca2fl_fadas.md, "FADAS (equations
as implemented)"), (docs/algorithms/ca2fl_fadas.md, "Readings taken").
"""

from __future__ import annotations

from afl_jax.algorithms.registry import joint_init, register
from afl_jax.clients.sgd import local_sgd
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.ca2fl import ca2fl as ca2fl_server
from afl_jax.servers.ca2fl import init_state as ca2fl_init_state
from afl_jax.servers.fadas import DELAY_RULES
from afl_jax.servers.fadas import fadas as fadas_server


@register('ca2fl')
def ca2fl(
  client_lr: float = 0.01,
  server_lr: float = 1.0,
  weighting: str = 'uniform',
) -> Algorithm:
  """CA2FL: eta_l = client_lr, eta = server_lr; the cache h_i starts at 0 for all N.

  ``weighting``: 'uniform' (Alg. 1) or 'examples' (by the clients' example counts).
  """
  client = local_sgd(client_lr)
  server = ca2fl_server(server_lr, weighting=weighting)
  init = joint_init(client, lambda params, tasks, _: ca2fl_init_state(params, tasks.client_id.size))
  return Algorithm('ca2fl', client, server, init=init)


@register(
  'fadas',
  delay_adaptive=checks.boolean(),
  tau_c=checks.integer(0),
  delay_rule=checks.choice(DELAY_RULES),
  bias_correction=checks.boolean(),
)
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
  """FADAS: AMSGrad server (beta1, beta2, epsilon) at rate eta_t (server_lr, tau_c).

  ``weighting``: 'uniform' (Alg. 1's mean) or 'examples' (by the clients' example counts).
  """
  server = fadas_server(
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
  return Algorithm('fadas', local_sgd(client_lr), server)
