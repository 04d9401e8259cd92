"""FedEcho's server: a FedBuff step followed by uncertainty-aware distillation.

Wang, Ma, Chen, "Stragglers Can Contribute More: Uncertainty-Aware Distillation for
Asynchronous Federated Learning", Alg. 1 and eqs. (2)-(4). One server step t:

* line 5: every arrival's model ``x^i = x_{t - tau} - Delta^i`` is run on the
  unlabeled set U and its logits stored (``[N, |U|, C]``, ``reported[i] = True``);
* lines 10-11: the FedBuff step ``x_hat = x_t - eta_g * mean_i Delta^i``, as
  :func:`afl_jax.servers.fedbuff`;
* lines 12-16: Q distillation steps on mini-batches of U toward the teacher of the
  stored logits, loss eq. (3) with alpha from eq. (4), step eq. (2) by an optax
  transformation (default ``chain(clip_by_global_norm(nu), adam(eta_d))``, Sec. 5.1)
  whose state lives in the server state;
* line 17: ``x_{t+1} = x_hat``.

Equations and options in (docs/algorithms/fedecho.md, "What runs"), readings in
(docs/algorithms/fedecho.md, "Readings taken"). With ``distill_steps = 0`` the rule is
FedBuff; a step with no valid arrival leaves the whole state unchanged, so there is
always a teacher when distillation runs. :func:`memory_overhead` is Sec. 3.2's memory
overhead: (docs/algorithms/fedecho.md, "Memory (Sec. 3.2)").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from afl_jax.core import checks, tree
from afl_jax.core.types import ServerRule, unchanged_if_no_arrival
from afl_jax.schedules.schedule import Schedule
from afl_jax.servers import distillation
from afl_jax.servers import weighting as weighting_lib
from afl_jax.servers.pseudo_gradient import aggregate

ALPHA_MODES = ('dynamic', 'fixed')
DISTILL_OPTIMIZERS = ('adam', 'sgd')


class FedEchoState(NamedTuple):
  params: Any
  opt_state: optax.OptState  # state of the FedBuff step (optax.sgd(eta_g))
  distill_state: optax.OptState  # state of the distillation optimizer
  logits: jax.Array  # [N, |U|, C] each client's latest logits on U (0 until it reports)
  reported: jax.Array  # bool[N] whether client i has reported at least once

  @property
  def num_clients(self) -> int:
    """N, the clients with stored logits (ids in [0, N)); the engine checks it."""
    return self.reported.shape[0]


def distill_optimizer(
  kind: str = 'adam', learning_rate: float = 3e-6, clip_norm: float = 5.0
) -> optax.GradientTransformation:
  """``chain(clip_by_global_norm(nu), adam(eta_d))`` (Sec. 5.1) or with ``sgd`` (eq. 2).

  Adam uses ``b1=0.9, b2=0.999, eps=1e-8`` as in Sec. 5.1. ``clip_norm=inf`` turns
  clipping off (the nu = infinity ablation, Table 11).
  """
  checks.one_of('optimizer', kind, DISTILL_OPTIMIZERS)
  checks.positive('distill_lr', learning_rate)
  if not checks.is_traced(clip_norm) and not clip_norm > 0:  # inf = no clipping
    raise ValueError(f'clip_norm (nu) must be > 0 (inf = no clipping); got {clip_norm}.')
  base = (
    optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8)
    if kind == 'adam'
    else optax.sgd(learning_rate)
  )
  if not checks.is_traced(clip_norm) and np.isinf(clip_norm):
    return base
  return optax.chain(optax.clip_by_global_norm(clip_norm), base)


def _last_valid(ids: jax.Array, mask: jax.Array) -> jax.Array:
  """bool[M]: valid slots not followed by a later valid slot of the same client."""
  later = jnp.triu(jnp.ones((ids.shape[0], ids.shape[0]), bool), k=1)
  clash = later & (ids[:, None] == ids[None, :]) & mask[None, :]
  return mask & ~jnp.any(clash, axis=1)


def fedecho_server(
  apply_fn: Callable[[Any, jax.Array], jax.Array],
  unlabeled_x: jax.Array,
  num_clients: int,
  *,
  server_lr: float = 1.0,
  distill_opt: optax.GradientTransformation | None = None,
  distill_steps: int = 10,
  distill_batch: int | None = None,
  alpha_mode: str = 'dynamic',
  alpha_min: float = 0.2,
  alpha_max: float = 0.8,
  alpha: float = 0.5,
  teacher: str = 'logits',
  reset_distill_state: bool = False,
  weighting: str = 'uniform',
) -> ServerRule:
  """FedEcho's server rule (Alg. 1 lines 4-5 and 9-17).

  Args:
    apply_fn: ``apply_fn(params, x) -> logits [B, C]`` of the global model.
    unlabeled_x: U, inputs ``[|U|, ...]`` whose labels are never read.
    num_clients: N (size of the logits store).
    server_lr: eta_g of the FedBuff step (the paper's eta).
    distill_opt: the distillation optimizer (default :func:`distill_optimizer`:
      clip nu=5 then Adam eta_d=3e-6).
    distill_steps: Q, distillation steps per server step (0 = FedBuff).
    distill_batch: |B|, mini-batch drawn from U without replacement with the server
      key (None = every step uses all of U).
    alpha_mode: 'dynamic' (eq. 4) or 'fixed' (``alpha`` every step, Table 7).
    alpha_min, alpha_max: the range of the dynamic alpha.
    alpha: the fixed alpha (alpha_mode='fixed').
    teacher: 'logits' (mean logits, Alg. 1 line 14) or 'probs' (mean probabilities).
    reset_distill_state: re-initialize the distillation optimizer every server step
      instead of carrying it across steps.
    weighting: the FedBuff step's mean, 'uniform' (default, Alg. 1 line 10) or
      'examples' (by the messages' example counts, :mod:`afl_jax.servers.weighting`); the teacher
      stays the plain mean of the stored logits (Alg. 1 line 14).
  """
  examples = weighting_lib.check(weighting)
  if not callable(apply_fn):
    raise ValueError(
      f'apply_fn must be a callable apply_fn(params, x) -> logits; got {apply_fn!r}.'
    )
  shape = np.shape(unlabeled_x)
  if len(shape) < 1 or shape[0] < 1:
    raise ValueError(f'unlabeled_x must be an array [|U|, ...] with |U| >= 1; got shape {shape}.')
  n = checks.positive_int('num_clients', num_clients)
  checks.positive('server_lr (eta_g)', server_lr)
  q_steps = checks.positive_int('distill_steps (Q)', distill_steps, 0)
  if distill_batch is not None and not (
    int(distill_batch) == distill_batch and 1 <= distill_batch <= shape[0]
  ):
    raise ValueError(
      f'distill_batch must be None (all of U) or an integer in [1, |U|='
      f'{shape[0]}]; got {distill_batch!r}.'
    )
  checks.one_of('alpha_mode', alpha_mode, ALPHA_MODES)
  if not checks.is_traced(alpha_min + alpha_max) and not 0 <= alpha_min <= alpha_max <= 1:
    raise ValueError(
      f'need 0 <= alpha_min <= alpha_max <= 1; got alpha_min={alpha_min}, alpha_max={alpha_max}.'
    )
  checks.in_range('alpha', alpha, 0.0, 1.0)
  checks.one_of('teacher', teacher, distillation.TEACHERS)
  num_u = shape[0]
  u = jnp.asarray(unlabeled_x)
  server_opt = optax.sgd(server_lr)
  d_opt = distill_opt if distill_opt is not None else distill_optimizer()

  def alpha_of(probs):
    if alpha_mode == 'dynamic':
      return distillation.dynamic_alpha(probs, alpha_min, alpha_max)
    return jnp.asarray(alpha, probs.dtype)

  def init(params):
    out = jax.eval_shape(apply_fn, params, u)
    return FedEchoState(
      params,
      server_opt.init(params),
      d_opt.init(params),
      jnp.zeros((n,) + tuple(out.shape), out.dtype),
      jnp.zeros(n, bool),
    )

  def store_logits(state, messages, arrivals):
    local = tree.sub(arrivals.start_broadcast, messages)
    write = _last_valid(arrivals.client_ids, arrivals.mask)

    def infer(item):
      x_local, valid = item
      return jax.lax.cond(
        valid,
        lambda p: apply_fn(p, u).astype(state.logits.dtype),
        lambda p: jnp.zeros(state.logits.shape[1:], state.logits.dtype),
        x_local,
      )

    new = jax.lax.map(infer, (local, write))
    logits = tree.scatter(state.logits, arrivals.client_ids, new, write)
    idx = jnp.where(write, arrivals.client_ids, n)
    return logits, state.reported.at[idx].set(True, mode='drop')

  def distill(params, d_state, logits, reported, key):
    def step(carry, q):
      p, s = carry
      if distill_batch is None:
        xb, yb = u, logits
      else:
        idx = jax.random.choice(jax.random.fold_in(key, q), num_u, (distill_batch,), replace=False)
        xb, yb = u[idx], logits[:, idx]
      probs = distillation.teacher_probs(yb, reported, teacher)
      a = alpha_of(probs)
      loss_fn = lambda w: distillation.distillation_loss(apply_fn(w, xb), probs, a)
      loss, grad = jax.value_and_grad(loss_fn)(p)
      updates, s = d_opt.update(grad, s, p)
      out = (loss, a, distillation.normalized_batch_entropy(probs), tree.global_norm(grad))
      return (optax.apply_updates(p, updates), s), out

    (new_p, new_s), (loss, a, h, gnorm) = jax.lax.scan(step, (params, d_state), jnp.arange(q_steps))
    metrics = {
      'distill_loss': jnp.mean(loss),
      'alpha': jnp.mean(a),
      'teacher_entropy': jnp.mean(h),
      'distill_grad_norm': jnp.mean(gnorm),
    }
    return new_p, new_s, metrics

  def update(state, messages, arrivals, key):
    logits, reported = store_logits(state, messages, arrivals)
    g = aggregate(messages, arrivals, examples=examples)
    updates, opt_state = server_opt.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {
      'update_norm': tree.global_norm(updates),
      'teachers': jnp.sum(reported).astype(jnp.float32),
    }
    d_state = state.distill_state
    if q_steps > 0:
      start = d_opt.init(params) if reset_distill_state else d_state
      new_p, new_s, dmetrics = distill(params, start, logits, reported, key)
      params, d_state = new_p, new_s
      ran = jnp.any(arrivals.mask)  # distillation takes effect only when someone reported
      metrics.update({k: jnp.where(ran, v, 0.0) for k, v in dmetrics.items()})
    new = FedEchoState(params, opt_state, d_state, logits, reported)
    return unchanged_if_no_arrival(arrivals, new, state), metrics

  return ServerRule(init, update)


def held_checkpoints(schedule: Schedule) -> np.ndarray:
  """int[T]: distinct past start versions the server holds while it collects step t.

  A job arriving at step t' from version s needs checkpoint x_s from its start
  until it arrives (its logits are computed on arrival, Alg. 1 line 5). While the
  buffer of step t fills, the jobs that still need an old checkpoint are those with
  ``s < t <= t'``; all of them were training when step t-1 was applied, so there
  are at most Mc of them (the current model, version t, is not counted).
  """
  t_arr = np.broadcast_to(np.arange(schedule.num_steps)[:, None], schedule.mask.shape)
  starts, ends = schedule.start_step[schedule.mask], t_arr[schedule.mask]
  out = np.zeros(schedule.num_steps, np.int64)
  for t in range(schedule.num_steps):
    out[t] = np.unique(starts[(starts < t) & (ends >= t)]).size
  return out


def memory_overhead(state: FedEchoState, schedule: Schedule | None = None) -> dict[str, float]:
  """FedEcho's extra server memory (Sec. 3.2): the logits store and the checkpoints.

  Returns a dict with ``logits_bytes`` (the whole ``[N, |U|, C]`` store),
  ``logits_bytes_per_client``, ``model_bytes`` (one checkpoint) and, if a schedule is
  given, ``max_checkpoints`` / ``mean_checkpoints`` from :func:`held_checkpoints` and
  ``checkpoint_bytes`` = ``max_checkpoints * model_bytes``.
  """
  logits = state.logits
  per_client = int(np.prod(logits.shape[1:])) * jnp.dtype(logits.dtype).itemsize
  model = sum(int(x.size) * jnp.dtype(x.dtype).itemsize for x in jax.tree.leaves(state.params))
  out = {
    'logits_bytes': float(per_client * logits.shape[0]),
    'logits_bytes_per_client': float(per_client),
    'model_bytes': float(model),
  }
  if schedule is not None:
    held = held_checkpoints(schedule)
    out.update(
      max_checkpoints=float(held.max()),
      mean_checkpoints=float(held.mean()),
      checkpoint_bytes=float(held.max() * model),
    )
  return out
