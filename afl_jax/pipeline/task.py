"""The supervised task: the loss, the federated problem (each client a view into one sample
array, batches drawn with replacement) and the evaluator."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from afl_jax.core import tree
from afl_jax.core.problem import Problem
from afl_jax.data import ClientLayout


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def make_loss(apply_fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
  """``loss_fn(params, (x, y))``: the cross-entropy of the model's logits."""
  return lambda params, batch: cross_entropy(apply_fn(params, batch[0]), batch[1])


def make_sample_fn(batch_size: int) -> Callable[..., tuple[jax.Array, jax.Array]]:
  """``sample_fn(shared, view, key)``: one batch of a client, uniform with replacement."""

  def sample_fn(shared, view, key):
    pos = view['offset'] + jax.random.randint(key, (batch_size,), 0, view['size'], dtype=jnp.int32)
    rows = shared['index'][pos]
    return shared['x'][rows], shared['y'][rows]

  return sample_fn


def make_problem(
  layout: ClientLayout, apply_fn: Callable[..., jax.Array], batch_size: int, dtype: Any
) -> Problem:
  return Problem(
    client_views={'offset': jnp.asarray(layout.offsets), 'size': jnp.asarray(layout.sizes)},
    shared={
      'x': jnp.asarray(layout.x, dtype),
      'y': jnp.asarray(layout.y),
      'index': jnp.asarray(layout.index, jnp.int32),
    },
    loss_fn=make_loss(apply_fn),
    sample_fn=make_sample_fn(batch_size),
    num_clients=layout.num_clients,
    client_sizes=np.asarray(layout.sizes, np.int32),
  )


def _batched(x: np.ndarray, y: np.ndarray, dtype: Any, batch: int) -> tuple:
  n = len(y)
  nb = max(1, math.ceil(n / batch))
  pad = lambda a: np.concatenate([a, np.zeros((nb * batch - n,) + a.shape[1:], a.dtype)])  # noqa: E731
  xs, ys, w = (pad(a).reshape((nb, batch) + a.shape[1:]) for a in (x, y, np.ones(n)))
  return jnp.asarray(xs, dtype), jnp.asarray(ys), jnp.asarray(w, dtype)


def _sums(apply_fn, params, xs, ys, w):
  def one(args):
    x, y, wi = args
    logits = apply_fn(params, x)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, y)
    return jnp.sum(ce * wi), jnp.sum((jnp.argmax(logits, -1) == y) * wi)

  loss, correct = jax.lax.map(one, (xs, ys, w))
  total = jnp.sum(w)
  return jnp.sum(loss) / total, jnp.sum(correct) / total


class EvalFns(NamedTuple):
  main: Callable[..., dict[str, jax.Array]]  # (params, test, train) -> test and train metrics
  held_out: Callable[..., tuple[jax.Array, jax.Array]]  # (params, xs, ys, w) -> (loss, acc)


def eval_fns(apply_fn: Callable[..., jax.Array]) -> EvalFns:
  """The jitted evaluation functions of one model."""

  @jax.jit
  def main(params, test, train):
    test_loss, test_acc = _sums(apply_fn, params, *test)
    x, y = train
    train_loss, grad = jax.value_and_grad(lambda p: cross_entropy(apply_fn(p, x), y))(params)
    return {
      'test_accuracy': test_acc,
      'test_loss': test_loss,
      'train_loss': train_loss,
      'grad_norm': tree.global_norm(grad),
    }

  return EvalFns(main, jax.jit(lambda params, xs, ys, w: _sums(apply_fn, params, xs, ys, w)))


class Evaluator(NamedTuple):
  """Test (and validation) accuracy and loss, training loss and gradient norm on a fixed
  sample of the clients' data."""

  fns: EvalFns
  test: tuple
  train: tuple
  val: tuple | None = None

  def __call__(self, params) -> dict[str, float]:
    out = dict(self.fns.main(params, self.test, self.train))
    if self.val is not None:
      out['val_loss'], out['val_accuracy'] = self.fns.held_out(params, *self.val)
    return {k: float(v) for k, v in jax.device_get(out).items()}


def make_evaluator(
  apply_fn: Callable[..., jax.Array],
  layout: ClientLayout,
  *,
  seed: int,
  train_samples: int,
  dtype: Any,
  batch: int = 1000,
) -> Evaluator:
  """The :class:`Evaluator`, its training sample ``train_samples`` rows (seed ``seed + 1``)."""
  rng = np.random.default_rng(seed + 1)
  owned = len(layout.index)
  pick = layout.index[rng.choice(owned, size=min(train_samples, owned), replace=False)]
  test = _batched(layout.test_x, layout.test_y, dtype, batch)
  train = (jnp.asarray(layout.x[pick], dtype), jnp.asarray(layout.y[pick]))
  val = _batched(layout.val_x, layout.val_y, dtype, batch) if len(layout.val_y) else None
  return Evaluator(eval_fns(apply_fn), test, train, val)
