"""FedEcho: buffered asynchronous FL with uncertainty-aware server distillation.

Wang, Ma, Chen, "Stragglers Can Contribute More: Uncertainty-Aware Distillation for
Asynchronous Federated Learning", Alg. 1, eqs. (2)-(4). Clients run local SGD
(Alg. 1 line 7, as in FedBuff); the server (:func:`afl_jax.servers.fedecho_server`) stores
every arriving client's logits on the unlabeled set U, takes the FedBuff step and
then Q clipped distillation steps toward the averaged teacher. Readings:
(docs/algorithms/fedecho.md, "Readings taken"); Table 1's delay model is
:mod:`afl_jax.schedules.fedecho_table1`.

Hyperparameters vs the paper's symbols:

=====================  ====================================================
``client_lr``          eta_l, local learning rate
``server_lr``          eta (Alg. 1 line 11; eta_g in Tables 8-10)
``distill_lr``         eta_d, distillation learning rate (eq. 2)
``distill_steps``      Q, distillation steps per server step (Alg. 1 line 12)
``distill_batch``      |B|, unlabeled mini-batch (line 13); None = all of U
``clip_norm``          nu, global-norm clipping threshold (eq. 2)
``alpha_min/max``      alpha_min, alpha_max of eq. (4)
``alpha_mode/alpha``   'dynamic' (eq. 4) or 'fixed' alpha (Table 7 ablation)
``teacher``            'logits' (line 14) or 'probs' (App. B)
``weighting``          the FedBuff mean: 'uniform' (line 10) or 'examples'
``optimizer``          'adam' (Sec. 5.1) or 'sgd' (eq. 2)
=====================  ====================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from afl_jax import clients
from afl_jax.algorithms.registry import register
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.distillation import TEACHERS
from afl_jax.servers.fedecho import (
  ALPHA_MODES,
  DISTILL_OPTIMIZERS,
  distill_optimizer,
  fedecho_server,
)


@register(
  'fedecho',
  context=('num_clients', 'apply_fn', 'unlabeled_x'),
  distill_steps=checks.integer(0),
  distill_lr=checks.POSITIVE,
  distill_batch=checks.integer(1, note=' (None = all of the unlabeled set)'),
  clip_norm=checks.real(0.0, low_open=True, finite=False, note=' (inf = no clipping)'),
  alpha_min=checks.real(0.0, 1.0),
  alpha_max=checks.real(0.0, 1.0),
  alpha_mode=checks.choice(ALPHA_MODES),
  alpha=checks.real(0.0, 1.0),
  teacher=checks.choice(TEACHERS),
  optimizer=checks.choice(DISTILL_OPTIMIZERS),
  reset_distill_state=checks.boolean(),
)
def fedecho(
  client_lr: float = 0.03,
  server_lr: float = 1.0,
  apply_fn: Callable[[Any, jax.Array], jax.Array] | None = None,
  unlabeled_x: jax.Array | None = None,
  distill_steps: int = 10,
  distill_lr: float = 3e-6,
  distill_batch: int | None = None,
  clip_norm: float = 5.0,
  alpha_min: float = 0.2,
  alpha_max: float = 0.8,
  alpha_mode: str = 'dynamic',
  alpha: float = 0.5,
  teacher: str = 'logits',
  optimizer: str = 'adam',
  num_clients: int | None = None,
  reset_distill_state: bool = False,
  weighting: str = 'uniform',
) -> Algorithm:
  """FedEcho (Alg. 1). ``apply_fn``, ``unlabeled_x`` and ``num_clients`` are required.

  Defaults follow Sec. 5.1 (nu=5, alpha in [0.2, 0.8], Adam with eta_d=3e-6) and
  Table 8 (eta_l=0.03, eta=1); Q and |B| are not given by the paper.
  """
  if apply_fn is None:
    raise ValueError('apply_fn is required: apply_fn(params, x) -> logits; got None.')
  if unlabeled_x is None:
    raise ValueError('unlabeled_x is required: the unlabeled set U, an array [|U|, ...]; got None.')
  if num_clients is None:
    raise ValueError('num_clients is required (N, an integer >= 1); got None.')
  opt = distill_optimizer(optimizer, distill_lr, clip_norm)
  server = fedecho_server(
    apply_fn,
    unlabeled_x,
    num_clients,
    server_lr=server_lr,
    distill_opt=opt,
    distill_steps=distill_steps,
    distill_batch=distill_batch,
    alpha_mode=alpha_mode,
    alpha_min=alpha_min,
    alpha_max=alpha_max,
    alpha=alpha,
    teacher=teacher,
    reset_distill_state=reset_distill_state,
    weighting=weighting,
  )
  return Algorithm('fedecho', clients.local_sgd(client_lr), server)
