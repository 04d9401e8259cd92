"""Local SGD, the client of FedAvg (McMahan et al., 2017), FedBuff (Nguyen et al.,
2022), FedAsync (Xie et al., 2019), FedFa Alg. 2 and AsynFL eq. (2).

K_{t,i} steps ``x_{k+1} = x_k - eta_l * grad F_i(x_k; xi_k)`` from the start
broadcast; the message is the pseudo-gradient ``Delta = x_start - x_K``.

:func:`run_local_steps` is the shared inner loop: ``task.max_steps`` iterations (or the
dynamic ``task.loop_steps``) whose steps ``k >= task.num_steps`` leave the carry
untouched, so clients with different K_{t,i} run together under ``vmap``. Every other
client rule builds on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from afl_jax.core import checks, tree
from afl_jax.core.types import ClientRule, EmptyState, LocalTask

ScalarOrSchedule = float | optax.Schedule


def run_local_steps(
  task: LocalTask,
  key: jax.Array,
  carry: Any,
  body: Callable[[Any, Any, jax.Array], tuple[Any, jax.Array]],
) -> tuple[Any, dict[str, jax.Array]]:
  """Masked local loop.

  Step k runs ``body`` and keeps its result only where ``k < task.num_steps``. The
  loop runs ``task.max_steps`` iterations (a ``lax.scan``), or, when the engine sets
  ``task.loop_steps`` (the largest K of the clients trained together), only that many
  (a ``lax.fori_loop`` with a dynamic trip count): the steps it skips are masked no-ops,
  and the losses are collected in the same ``[max_steps]`` array, so both loops give
  the same result bit for bit.

  Args:
    task: the client's task (``num_steps``, ``max_steps``, ``loop_steps``, data).
    key: PRNG key; step k samples its batch with ``fold_in(key, k)``.
    carry: initial carry (e.g. the params).
    body: ``body(carry, batch, k) -> (new_carry, loss)``.

  Returns:
    The carry after ``num_steps`` steps and ``{'train_loss': mean loss of the steps run}``.
  """

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
  n = jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)
  return carry, {'train_loss': jnp.sum(losses) / n}


def learning_rate_at(lr: ScalarOrSchedule, k: jax.Array) -> jax.Array:
  return lr(k) if callable(lr) else jnp.asarray(lr)


def local_sgd(learning_rate: ScalarOrSchedule, *, extra_grad: Callable | None = None) -> ClientRule:
  """K steps of SGD from the broadcast params; sends ``Delta = x_start - x_K``.

  Args:
    learning_rate: eta_l, a float > 0 or an optax schedule of the local step k (a
      schedule or a sweep's traced value passes unchecked).
    extra_grad: optional ``extra_grad(params, start) -> tree`` added to every
      gradient (FedProx's proximal term is ``mu * (params - start)``).
  """
  checks.positive('client_lr', learning_rate)

  def init(params, task, key):
    del params, task, key
    return EmptyState()

  def update(start, state, task, key):
    def body(params, batch, k):
      loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
      if extra_grad is not None:
        g = tree.add(g, extra_grad(params, start))
      return tree.axpy(-learning_rate_at(learning_rate, k), g, params), loss

    final, metrics = run_local_steps(task, key, start, body)
    return tree.sub(start, final), state, metrics

  return ClientRule(init, update)
