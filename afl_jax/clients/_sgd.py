"""Local SGD, the client of FedAvg, FedBuff, FedAsync, FedFa (Alg. 2) and AsynFL (eq. 2), and
:func:`run_local_steps`, every client rule's masked inner loop."""

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
  """The carry after ``task.num_steps`` steps of ``body(carry, batch, k) -> (carry, loss)``, batch k
  drawn with ``fold_in(key, k)``, and their mean ``train_loss``: a ``lax.scan`` over
  ``task.max_steps`` whose steps past ``num_steps`` are masked no-ops (clients with different K
  run together under ``vmap``), or a ``fori_loop`` over ``task.loop_steps`` when the engine sets
  it (bit-identical)."""

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


@checks.validated()
def local_sgd(client_lr: ScalarOrSchedule, *, extra_grad: Callable | None = None) -> ClientRule:
  """K steps of SGD at eta_l = ``client_lr`` (a number or an optax schedule of k), sending ``x_start
  - x_K``; ``extra_grad(params, start)`` is added to every gradient (FedProx)."""

  def init(params, task, key):
    del params, task, key
    return EmptyState()

  def update(start, state, task, key):
    def body(params, batch, k):
      loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
      if extra_grad is not None:
        g = tree.add(g, extra_grad(params, start))
      return tree.axpy(-learning_rate_at(client_lr, k), g, params), loss

    final, metrics = run_local_steps(task, key, start, body)
    return tree.sub(start, final), state, metrics

  return ClientRule(init, update)
