"""Input reshaping shared by the models."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp


def as_float(x: jax.Array) -> jax.Array:
  x = jnp.asarray(x)
  return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)


def flatten(x: jax.Array) -> jax.Array:
  """``[B, ...] -> [B, prod(...)]``; the leading axis is always the batch."""
  x = as_float(x)
  return x.reshape(x.shape[0], -1)


def as_nhwc(x: jax.Array, image_shape: Sequence[int]) -> jax.Array:
  """A batch ``[B, H, W, C]``, ``[B, H, W]`` or flat ``[B, H*W*C]`` as NHWC."""
  x = as_float(x)
  if x.ndim == 4:
    return x
  if x.ndim == 3:
    return x[..., None]
  if x.ndim == 2:
    if x.shape[1] != math.prod(image_shape):
      raise ValueError(
        f'flat input of width {x.shape[1]} does not match image_shape '
        f'{tuple(image_shape)} ({math.prod(image_shape)} values)'
      )
    return x.reshape(x.shape[0], *image_shape)
  raise ValueError(f'expected a batch [B, H, W, C], [B, H, W] or [B, D]; got {x.shape}')
