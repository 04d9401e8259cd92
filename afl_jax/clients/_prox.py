"""FedProx's local solver (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, MLSys 2020, Alg. 2):
K_{t,i} SGD steps on ``F_k(w) + mu/2 ||w - w^t||^2``, i.e. local SGD whose gradient gets
``mu (w - w^t)``; ``mu = 0`` is local SGD (docs/algorithms/fedfa.md).
"""

from __future__ import annotations

from collections.abc import Callable

from afl_jax.clients._sgd import ScalarOrSchedule, local_sgd
from afl_jax.core import checks, tree
from afl_jax.core.types import ClientRule, Params


def proximal_gradient(mu: float) -> Callable[[Params, Params], Params]:
  """``g(w, w^t) = mu * (w - w^t)``, the gradient of ``mu/2 ||w - w^t||^2``."""
  return lambda params, start: tree.scale(mu, tree.sub(params, start))


@checks.validated()
def prox_sgd(client_lr: ScalarOrSchedule, mu: float) -> ClientRule:
  """K steps of SGD at eta_l = ``client_lr`` on FedProx's proximal objective; sends
  ``w^t - w_K``."""
  return local_sgd(client_lr, extra_grad=proximal_gradient(mu))
