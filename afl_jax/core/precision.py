"""Mixed precision: the clients' loss and gradients in a low dtype, the rest in float32."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from afl_jax.core.types import ClientRule, LocalTask


def cast_floating(tree: Any, dtype: Any) -> Any:

  def one(x):
    x = jnp.asarray(x)
    return x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x

  return jax.tree.map(one, tree)


def _low_precision_task(task: LocalTask, dtype: Any) -> LocalTask:
  loss_fn = task.loss_fn

  def loss(params, batch):
    value = loss_fn(cast_floating(params, dtype), cast_floating(batch, dtype))
    floats = [x.dtype for x in jax.tree.leaves(params) if jnp.issubdtype(x.dtype, jnp.floating)]
    return value.astype(jnp.result_type(*floats) if floats else jnp.float32)

  return task.replace(loss_fn=loss)


def with_compute_dtype(client: ClientRule, dtype: Any) -> ClientRule:
  """``client`` with its loss and gradients in ``dtype`` (e.g. ``jnp.bfloat16``); its state,
  message and metrics keep their dtypes."""

  def init(params, task, key):
    return client.init(params, _low_precision_task(task, dtype), key)

  def update(start, state, task, key):
    return client.update(start, state, _low_precision_task(task, dtype), key)

  return ClientRule(init, update)
