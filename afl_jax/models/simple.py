"""Multinomial logistic regression, the multilayer perceptron and the models' input reshaping."""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


def _as_float(x: jax.Array) -> jax.Array:
  x = jnp.asarray(x)
  return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)


def flatten(x: jax.Array) -> jax.Array:
  """``[B, ...] -> [B, prod(...)]`` as floats; the leading axis is the batch."""
  x = _as_float(x)
  return x.reshape(x.shape[0], -1)


def as_nhwc(x: jax.Array, image_shape: Sequence[int]) -> jax.Array:
  """A batch ``[B, H, W, C]``, ``[B, H, W]`` or flat ``[B, H*W*C]`` as NHWC floats."""
  x = _as_float(x)
  if x.ndim in (3, 4):
    return x if x.ndim == 4 else x[..., None]
  if x.ndim != 2:
    raise ValueError(f'expected a batch [B, H, W, C], [B, H, W] or [B, D]; got {x.shape}')
  if x.shape[1] != math.prod(image_shape):
    raise ValueError(
      f'flat input of width {x.shape[1]} does not match image_shape '
      f'{tuple(image_shape)} ({math.prod(image_shape)} values)'
    )
  return x.reshape(x.shape[0], *image_shape)


class LogisticRegression(nn.Module):
  """Flatten + ``Dense(num_classes)``."""

  num_classes: int = 10

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    return nn.Dense(self.num_classes)(flatten(x))


class MLP(nn.Module):
  """Flatten, ReLU hidden layers, linear output; the default 784-200-200-10 is McMahan et al.'s
  (2017) "2NN"."""

  num_classes: int = 10
  hidden_sizes: Sequence[int] = (200, 200)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = flatten(x)
    for width in self.hidden_sizes:
      x = nn.relu(nn.Dense(width)(x))
    return nn.Dense(self.num_classes)(x)
