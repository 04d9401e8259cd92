"""FedProx's local solver (Li et al., MLSys 2020, Alg. 2): local SGD whose gradient gets ``mu (w -
w^t)`` (docs/algorithms/fedfa.md)."""

from __future__ import annotations

from collections.abc import Callable

from afl_jax.clients._sgd import ScalarOrSchedule, local_sgd
from afl_jax.core import checks, tree
from afl_jax.core.types import ClientRule, Params


def proximal_gradient(mu: float) -> Callable[[Params, Params], Params]:
  return lambda params, start: tree.scale(mu, tree.sub(params, start))


@checks.validated()
def prox_sgd(client_lr: ScalarOrSchedule, mu: float) -> ClientRule:
  return local_sgd(client_lr, extra_grad=proximal_gradient(mu))
