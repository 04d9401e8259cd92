"""FedEcho (Wang, Ma, Chen, "Stragglers Can Contribute More", Alg. 1, eqs. (2)-(4))
(docs/algorithms/fedecho.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from afl_jax import checks
from afl_jax.algorithms._shared import ALGORITHMS, SERVERS, aggregate, local_sgd
from afl_jax.core import tree
from afl_jax.core.types import Algorithm, ServerRule, unchanged_if_no_arrival
from afl_jax.schedules.schedule import Schedule

TEACHERS = ('logits', 'probs')


def teacher_probs(logits: jax.Array, reported: jax.Array, teacher: str = 'logits') -> jax.Array:
  """``[B, C]`` teacher of the reported clients' logits ``[N, B, C]``: softmax of the mean
  (``'logits'``, Alg. 1 line 14) or mean of softmaxes (``'probs'``, App. B)."""
  w = reported.astype(logits.dtype)
  w = w / jnp.maximum(jnp.sum(w), 1.0)
  if teacher == 'logits':
    return jax.nn.softmax(jnp.tensordot(w, logits, axes=1), axis=-1)
  return jnp.tensordot(w, jax.nn.softmax(logits, axis=-1), axes=1)


def normalized_batch_entropy(probs: jax.Array) -> jax.Array:
  """``H_hat = mean_u H^u / log C`` in [0, 1] (eq. 4)."""
  entropy = -jnp.sum(jax.scipy.special.xlogy(probs, probs), axis=-1)
  return jnp.mean(entropy) / jnp.log(jnp.asarray(probs.shape[-1], probs.dtype))


def dynamic_alpha(probs: jax.Array, alpha_min: float, alpha_max: float) -> jax.Array:
  """``alpha = H_hat alpha_max + (1 - H_hat) alpha_min`` (eq. 4), as a constant."""
  h = jax.lax.stop_gradient(normalized_batch_entropy(probs))
  return h * alpha_max + (1.0 - h) * alpha_min


def distillation_loss(student_logits: jax.Array, probs: jax.Array, alpha: Any) -> jax.Array:
  """Eq. (3): ``alpha KL(p || q) + (1 - alpha) CE(argmax p, q)``, constant ``probs``, ``alpha``."""
  probs = jax.lax.stop_gradient(probs)
  alpha = jax.lax.stop_gradient(jnp.asarray(alpha, student_logits.dtype))
  log_q = lambda: jax.nn.log_softmax(student_logits, axis=-1)  # one per term: the same program
  kl = jnp.mean(jnp.sum(jax.scipy.special.xlogy(probs, probs) - probs * log_q(), axis=-1))
  labels = jnp.argmax(probs, axis=-1)
  ce = -jnp.mean(jnp.take_along_axis(log_q(), labels[:, None], axis=-1))
  return alpha * kl + (1.0 - alpha) * ce


ALPHA_MODES = ('dynamic', 'fixed')
DISTILL_OPTIMIZERS = ('adam', 'sgd')


class FedEchoState(NamedTuple):
  params: Any
  opt_state: optax.OptState  # the FedBuff step's
  distill_state: optax.OptState
  logits: jax.Array  # [N, |U|, C] each client's latest logits on U (0 until it reports)
  reported: jax.Array  # bool[N]

  @property
  def num_clients(self) -> int:
    return self.reported.shape[0]


def distill_optimizer(
  optimizer: str, distill_lr: float, clip_norm: float
) -> optax.GradientTransformation:
  """Sec. 5.1's ``chain(clip_by_global_norm(nu), adam(eta_d))``, or ``sgd`` (eq. 2)."""
  adam = lambda lr: optax.adam(lr, b1=0.9, b2=0.999, eps=1e-8)
  base = {'adam': adam, 'sgd': optax.sgd}[optimizer](distill_lr)
  if not checks.is_traced(clip_norm) and np.isinf(clip_norm):
    return base
  return optax.chain(optax.clip_by_global_norm(clip_norm), base)


def _unlabeled_problem(unlabeled_x: Any) -> str | None:
  shape = np.shape(unlabeled_x)
  if len(shape) < 1 or shape[0] < 1:
    return f'must be an array [|U|, ...] with |U| >= 1; got shape {shape}'
  return None


RUN_RULES = (
  checks.Rule(
    'apply_fn',
    lambda apply_fn: (
      None if callable(apply_fn) else 'must be a callable apply_fn(params, x) -> logits'
    ),
  ),
  checks.Rule('unlabeled_x', _unlabeled_problem),
  checks.Rule(
    'distill_batch',
    lambda distill_batch, unlabeled_x: (
      f'exceeds the {np.shape(unlabeled_x)[0]} unlabeled inputs'
      if distill_batch is not None and distill_batch > np.shape(unlabeled_x)[0]
      else None
    ),
  ),
)


@SERVERS.register(
  'fedecho',
  context=('apply_fn', 'unlabeled_x', 'num_clients'),
  rules=RUN_RULES,
  distill_steps=checks.integer(0),
  distill_batch=checks.integer(1, note=' (None = all of the unlabeled set)'),
  alpha_mode=checks.choice(ALPHA_MODES),
  alpha_min=checks.real(0.0, 1.0),
  alpha_max=checks.real('alpha_min', 1.0),
  alpha=checks.real(0.0, 1.0),
  teacher=checks.choice(TEACHERS),
  optimizer=checks.choice(DISTILL_OPTIMIZERS),
  distill_lr=checks.POSITIVE,
  clip_norm=checks.real(0.0, low_open=True, finite=False, note=' (inf = no clipping)'),
)
def fedecho_server(
  apply_fn: Callable[[Any, jax.Array], jax.Array],
  unlabeled_x: jax.Array,
  num_clients: int,
  *,
  server_lr: float = 1.0,
  optimizer: str = 'adam',
  distill_lr: float = 3e-6,
  clip_norm: float = 5.0,
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
  """FedEcho's server (Alg. 1 lines 4-5, 9-17) distilling on U = ``unlabeled_x``."""
  examples = weighting == 'examples'
  n, q_steps, num_u = num_clients, distill_steps, np.shape(unlabeled_x)[0]
  u = jnp.asarray(unlabeled_x)
  server_opt = optax.sgd(server_lr)
  d_opt = distill_optimizer(optimizer, distill_lr, clip_norm)

  def alpha_of(probs):
    fixed = alpha_mode != 'dynamic'
    return jnp.asarray(alpha, probs.dtype) if fixed else dynamic_alpha(probs, alpha_min, alpha_max)

  def init(params):
    out = jax.eval_shape(apply_fn, params, u)
    logits = jnp.zeros((n,) + tuple(out.shape), out.dtype)
    opt_states = server_opt.init(params), d_opt.init(params)
    return FedEchoState(params, *opt_states, logits, jnp.zeros(n, bool))

  def store_logits(state, messages, arrivals):
    local = tree.sub(arrivals.start_broadcast, messages)
    ids, mask = arrivals.client_ids, arrivals.mask  # each client's last valid row writes
    later = jnp.triu(jnp.ones((ids.shape[0], ids.shape[0]), bool), k=1)
    write = mask & ~jnp.any(later & (ids[:, None] == ids[None, :]) & mask[None, :], axis=1)

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
      probs = teacher_probs(yb, reported, teacher)
      a = alpha_of(probs)
      loss_fn = lambda w: distillation_loss(apply_fn(w, xb), probs, a)
      loss, grad = jax.value_and_grad(loss_fn)(p)
      updates, s = d_opt.update(grad, s, p)
      out = (loss, a, normalized_batch_entropy(probs), tree.global_norm(grad))
      return (optax.apply_updates(p, updates), s), out

    (new_p, new_s), out = jax.lax.scan(step, (params, d_state), jnp.arange(q_steps))
    names = ('distill_loss', 'alpha', 'teacher_entropy', 'distill_grad_norm')
    return new_p, new_s, {k: jnp.mean(v) for k, v in zip(names, out)}

  def update(state, messages, arrivals, key):
    logits, reported = store_logits(state, messages, arrivals)
    g = aggregate(messages, arrivals, examples=examples)
    updates, opt_state = server_opt.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {'update_norm': tree.global_norm(updates)}
    metrics['teachers'] = jnp.sum(reported).astype(jnp.float32)
    d_state = state.distill_state
    if q_steps > 0:
      start = d_opt.init(params) if reset_distill_state else d_state
      params, d_state, dmetrics = distill(params, start, logits, reported, key)
      ran = jnp.any(arrivals.mask)  # distillation takes effect only when someone reported
      metrics.update({k: jnp.where(ran, v, 0.0) for k, v in dmetrics.items()})
    new = FedEchoState(params, opt_state, d_state, logits, reported)
    return unchanged_if_no_arrival(arrivals, new, state), metrics

  return ServerRule(init, update)


def held_checkpoints(schedule: Schedule) -> np.ndarray:
  """int[T]: the distinct past versions held while step t collects (Sec. 3.2's memory)."""
  t_arr = np.broadcast_to(np.arange(schedule.num_steps)[:, None], schedule.mask.shape)
  starts, ends = schedule.start_step[schedule.mask], t_arr[schedule.mask]
  out = np.zeros(schedule.num_steps, np.int64)
  for t in range(schedule.num_steps):
    out[t] = np.unique(starts[(starts < t) & (ends >= t)]).size
  return out


@ALGORITHMS.register(
  'fedecho', context=('num_clients', 'apply_fn', 'unlabeled_x'), uses=(fedecho_server,)
)
def fedecho(
  client_lr: float = 0.03,
  *,
  apply_fn: Callable[[Any, jax.Array], jax.Array],
  unlabeled_x: jax.Array,
  num_clients: int,
  **server: Any,
) -> Algorithm:
  """FedEcho with the defaults of Sec. 5.1 and Table 8."""
  server_rule = fedecho_server(apply_fn, unlabeled_x, num_clients, **server)
  return Algorithm('fedecho', local_sgd(client_lr), server_rule)
