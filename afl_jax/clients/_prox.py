"""FedProx's local solver: local SGD on the proximal objective.

Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in Heterogeneous
Networks", MLSys 2020, Alg. 2: client k (inexactly) minimizes

.. math::  h_k(w; w^t) = F_k(w) + \\frac{\\mu}{2} \\lVert w - w^t \\rVert^2

from the broadcast ``w^t``. We run K_{t,i} SGD steps on ``h_k``:
``w <- w - eta_l (g_k(w) + mu (w - w^t))``, i.e. :func:`~afl_jax.clients.local_sgd`
with its ``extra_grad`` hook set to the proximal gradient. ``mu = 0`` is local SGD.
The message is the usual pseudo-gradient ``Delta = w^t - w_K``, so FedProx composes
with every server (FedAvg, FedBuff, FedFa).
"""

from __future__ import annotations

from collections.abc import Callable

from afl_jax.clients.sgd import ScalarOrSchedule, local_sgd
from afl_jax.core import checks, tree
from afl_jax.core.types import ClientRule, Params


def proximal_gradient(mu: float) -> Callable[[Params, Params], Params]:
  """``g(w, w^t) = mu * (w - w^t)``, the gradient of ``mu/2 ||w - w^t||^2``."""
  return lambda params, start: tree.scale(mu, tree.sub(params, start))


def prox_sgd(client_lr: ScalarOrSchedule, mu: float) -> ClientRule:
  """K steps of SGD on FedProx's ``F_k(w) + mu/2 ||w - w^t||^2``; sends ``w^t - w_K``.

  Args:
    client_lr: eta_l, a float > 0 or an optax schedule of the local step.
    mu: the proximal coefficient, finite and >= 0 (0 recovers local SGD).

  Returns:
    A :class:`~afl_jax.core.types.ClientRule` (stateless).
  """
  checks.non_negative('mu', mu)
  return local_sgd(client_lr, extra_grad=proximal_gradient(mu))
