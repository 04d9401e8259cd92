"""What several algorithms share: registries, run facts, the masked local loop and SGD, arrival
weights (AsynFL eq. 5, FedAvg), optax servers, FedNova's scales, Adam's moments, cosine weights."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afl_jax import checks
from afl_jax.core import tree
from afl_jax.core.types import (
  Arrivals,
  ClientRule,
  EmptyState,
  LocalTask,
  Params,
  ServerRule,
  unchanged_if_no_arrival,
)
from afl_jax.registry import Registry

ScalarOrSchedule = float | optax.Schedule


@dataclasses.dataclass(frozen=True, eq=False)
class RunInfo:
  """Run facts some factories take: N, the widest step S, the median K, T, ``apply_fn``, U."""

  num_clients: int | None = None
  arrivals_per_step: int | None = None
  local_steps: int | None = None
  num_rounds: int | None = None
  apply_fn: Callable[..., Any] | None = None
  unlabeled_x: Any = None


CONTEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunInfo))
CLIENTS = Registry('client', shared=checks.COMMON)
SERVERS = Registry('server', shared=checks.COMMON)
ALGORITHMS = Registry(
  'algorithm', section='hparams', name_field='algorithm', shared=checks.COMMON, facts=CONTEXT_FIELDS
)


def joint_init(
  client: ClientRule, server_init: Callable[[Any, Any, Any], Any]
) -> Callable[..., tuple[Any, Any]]:
  """``Algorithm.init``: ``client.init`` vmapped over the N clients, then ``server_init``."""

  def init(params, tasks, key):
    keys = jax.random.split(key, tasks.client_id.shape[0])
    states = jax.vmap(client.init, in_axes=(None, tasks.batch_axes(), 0))(params, tasks, keys)
    return server_init(params, tasks, states), states

  return init


# ---- clients ------------------------------------------------------------------------------------
def run_local_steps(
  task: LocalTask,
  key: jax.Array,
  carry: Any,
  body: Callable[[Any, Any, jax.Array], tuple[Any, jax.Array]],
) -> tuple[Any, dict[str, jax.Array]]:
  """The carry after ``task.num_steps`` steps of ``body(carry, batch, k) -> (carry, loss)`` (batch k
  from ``fold_in(key, k)``) and the mean ``train_loss``: a scan over ``task.max_steps`` masking the
  steps past ``num_steps``, or a ``fori_loop`` over ``task.loop_steps`` (bit-identical)."""

  def step(c, k):
    batch = task.sample(jax.random.fold_in(key, k))
    new_c, loss = body(c, batch, k)
    run = k < task.num_steps
    return tree.where(run, new_c, c), jnp.where(run, loss, 0.0)

  if task.loop_steps is None:
    carry, losses = jax.lax.scan(step, carry, jnp.arange(task.max_steps))
  else:
    loss_shape = jax.eval_shape(step, carry, jnp.int32(0))[1]

    def one(k, state):
      c, losses = state
      c, loss = step(c, k)
      return c, losses.at[k].set(loss)

    losses = jnp.zeros((task.max_steps,) + loss_shape.shape, loss_shape.dtype)
    bound = jnp.minimum(jnp.asarray(task.loop_steps, jnp.int32), task.max_steps)
    carry, losses = jax.lax.fori_loop(0, bound, one, (carry, losses))
  return carry, {'train_loss': jnp.sum(losses) / steps_run(task)}


def steps_run(task: LocalTask) -> jax.Array:  # K, the local steps run (at least 1)
  return jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)


def sgd_with_mean_gradient(task, key, start: Params, lr: float, direction: Callable) -> tuple:
  """``(x_K, mean of the K gradients, metrics)`` of K steps ``x <- x - lr direction(grad)``: the
  corrected SGD of MasFL (Alg. 2 line 3) and FedAC with its variate (SCAFFOLD option II)."""

  def body(carry, batch, k):
    params, grad_sum = carry
    loss, grad = jax.value_and_grad(task.loss_fn)(params, batch)
    return (tree.axpy(-lr, direction(grad), params), tree.add(grad_sum, grad)), loss

  carry0 = (start, tree.zeros_like(start))
  (final, grad_sum), metrics = run_local_steps(task, key, carry0, body)
  return final, tree.scale(1.0 / steps_run(task), grad_sum), metrics


def sgd_steps(task, key, start: Params, client_lr: ScalarOrSchedule, extra_grad=None) -> tuple:
  """``(x_K, metrics)``: K steps ``x <- x - lr_k (grad + extra_grad(x, start))`` from ``start``."""

  def body(params, batch, k):
    loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
    if extra_grad is not None:
      g = tree.add(g, extra_grad(params, start))
    lr = client_lr(k) if callable(client_lr) else jnp.asarray(client_lr)
    return tree.axpy(-lr, g, params), loss

  return run_local_steps(task, key, start, body)


@CLIENTS.register('local_sgd', context=('extra_grad',))
def local_sgd(client_lr: ScalarOrSchedule, *, extra_grad: Callable | None = None) -> ClientRule:
  """K steps of SGD at ``client_lr`` (a number or schedule of k), sending ``x_start - x_K``;
  ``extra_grad(params, start)`` is added to every gradient (FedProx)."""

  def update(start, state, task, key):
    final, metrics = sgd_steps(task, key, start, client_lr, extra_grad)
    return tree.sub(start, final), state, metrics

  return ClientRule(lambda params, task, key: EmptyState(), update)


@CLIENTS.register('prox_sgd')
def prox_sgd(client_lr: ScalarOrSchedule, mu: float) -> ClientRule:
  """FedProx's local solver (Li et al., MLSys 2020, Alg. 2): gradient + ``mu (w - w^t)``."""
  return local_sgd(
    client_lr, extra_grad=lambda params, start: tree.scale(mu, tree.sub(params, start))
  )


def divide_by_local_steps(client: ClientRule) -> ClientRule:
  """``client`` sending ``Delta / K_{t,i}``, K the steps it ran (Autonomous Multistage FedGM,
  Sun et al., Alg. 4 lines 6-7)."""

  def update(start, state, task, key):
    message, state, metrics = client.update(start, state, task, key)
    k = steps_run(task)
    message = jax.tree.map(lambda m: m / k.astype(m.dtype), message)
    return message, state, metrics

  return ClientRule(client.init, update)


# ---- arrival weights ----------------------------------------------------------------------------
def row_counts(arrivals: Any, field: str = 'num_examples') -> jax.Array:
  value = getattr(arrivals, field)
  if value is None:
    raise ValueError(f"weighting='examples' needs arrivals.{field}; or use weighting='uniform'.")
  return jnp.asarray(value, jnp.result_type(float))


def row_weights(
  arrivals: Any,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  examples: bool = False,
) -> jax.Array:
  """float[M] weight of each message (0 on invalid rows)."""
  dtype = jnp.result_type(float)
  mask = arrivals.mask.astype(dtype)
  if not examples:
    denom = jnp.sum(mask) if normalizer == 'arrivals' else jnp.asarray(num_clients, dtype)
    return mask / jnp.maximum(denom, 1.0)
  n = row_counts(arrivals) * mask
  denom = jnp.sum(n) if normalizer == 'arrivals' else row_counts(arrivals, 'total_examples')
  return n / jnp.where(denom > 0, denom, 1.0)


def client_weights(counts: jax.Array, total: Any = None) -> jax.Array:
  """float[N] ``n_i / total`` (default ``sum_j n_j``)."""
  dtype = jnp.result_type(float)
  counts = jnp.asarray(counts, dtype)
  total = jnp.sum(counts) if total is None else jnp.asarray(total, dtype)
  return counts / jnp.where(total > 0, total, 1.0)


def uniform_weights(num_clients: int) -> jax.Array:
  return jnp.full((num_clients,), 1.0 / num_clients, jnp.result_type(float))


# ---- servers on the mean pseudo-gradient --------------------------------------------------------
class OptimizerServerState(NamedTuple):
  params: Any
  opt_state: optax.OptState


def aggregate(
  messages: Any,
  arrivals: Arrivals,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  examples: bool = False,
) -> Any:
  return tree.weighted_sum(messages, row_weights(arrivals, normalizer, num_clients, examples))


def step_result(arrivals: Arrivals, new: Any, state: Any, **metrics: Any) -> tuple[Any, dict]:
  """``new`` if any arrival is valid, else ``state``, and ``update_norm`` with ``metrics``."""
  new = unchanged_if_no_arrival(arrivals, new, state)
  return new, {'update_norm': tree.global_norm(tree.sub(state.params, new.params)), **metrics}


# n of eq. (5) when the mean is over all clients.
NEEDS_NUM_CLIENTS = checks.Rule(
  'normalizer',
  lambda normalizer, num_clients: (
    "'clients' needs num_clients (n >= 1)"
    if normalizer == 'clients' and num_clients is None
    else None
  ),
)


def optimizer_server(
  optimizer: optax.GradientTransformation,
  *,
  normalizer: str = 'arrivals',
  num_clients: int | None = None,
  weighting: str = 'uniform',
) -> ServerRule:
  """``optimizer`` on the weighted mean message."""
  examples = weighting == 'examples'

  def init(params):
    return OptimizerServerState(params, optimizer.init(params))

  def update(state, messages, arrivals, key):
    del key
    g = aggregate(messages, arrivals, normalizer, num_clients, examples)
    updates, opt_state = optimizer.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return step_result(arrivals, OptimizerServerState(params, opt_state), state)

  return ServerRule(init, update)


# ---- FedNova (Wang et al., NeurIPS 2020, Sec. 5) ------------------------------------------------
def nova_scales(
  num_steps: jax.Array, mask: jax.Array, weights: jax.Array | None = None
) -> jax.Array:
  """float[M] ``tau_eff / tau_i`` of the valid rows (0 on padding), ``weights`` p_i (default
  uniform)."""
  dtype = jnp.result_type(float)
  tau = num_steps.astype(dtype)
  valid = mask.astype(dtype)
  if weights is None:
    weights = valid / jnp.maximum(jnp.sum(valid), 1.0)
  tau_eff = jnp.sum(tau * weights.astype(dtype) * valid)
  return jnp.where(mask, tau_eff / jnp.maximum(tau, 1.0), 0.0)


def nova(inner: ServerRule, *, weighting: str = 'uniform') -> ServerRule:
  """``inner`` on the messages scaled by :func:`nova_scales`, with the metric ``tau_eff``."""
  examples = weighting == 'examples'

  def update(state, messages, arrivals: Arrivals, key):
    weights = row_weights(arrivals, 'arrivals', None, examples)
    scales = nova_scales(arrivals.num_steps, arrivals.mask, weights)
    scaled = jax.tree.map(
      lambda x: scales.astype(x.dtype).reshape((-1,) + (1,) * (x.ndim - 1)) * x, messages
    )
    state, metrics = inner.update(state, scaled, arrivals, key)
    return state, {**metrics, 'tau_eff': jnp.sum(arrivals.num_steps * weights)}

  return inner._replace(update=update)


# ---- Adam's moments (FADAS, FedAC) and cosine weights (FedAC, Port) -----------------------------
def moments(beta1: float, beta2: float, mu: Any, nu: Any, g: Any) -> tuple[Any, Any]:
  """Adam's first and second moments without bias correction."""
  mu = jax.tree.map(lambda m, gi: beta1 * m + (1 - beta1) * gi, mu, g)
  nu = jax.tree.map(lambda v, gi: beta2 * v + (1 - beta2) * gi * gi, nu, g)
  return mu, nu


def cosine_rows(a: Params, b: Params, empty: float) -> jax.Array:
  """``cos(a_m, b_m)`` for trees stacked on axis 0 (``empty`` where a norm is 0)."""

  def one(x, y):
    dot = tree.vdot(x, y)
    nx, ny = tree.global_norm(x), tree.global_norm(y)
    ok = (nx > 0) & (ny > 0)
    return jnp.where(ok, dot / jnp.where(ok, nx * ny, 1.0), empty)

  return jax.vmap(one)(a, b)


def normalized_weights(raw: jax.Array, mask: jax.Array) -> jax.Array:
  """``raw / sum(raw)`` over the valid rows; uniform over them when that sum is 0."""
  raw = jnp.where(mask, raw, 0.0)
  total = jnp.sum(raw)
  uniform = mask / jnp.maximum(jnp.sum(mask), 1)
  return jnp.where(total > 0, raw / jnp.where(total > 0, total, 1.0), uniform)
