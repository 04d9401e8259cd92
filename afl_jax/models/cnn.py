"""The Fashion-MNIST CNN of the MasFL experiments (Yan et al., Sec. 5, App. E.1: "three
convolutional layers and two fully connected layers"); widths, kernels and pooling are our
choice (458,570 parameters; docs/algorithms.md), attributes so another reading fits."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax

from afl_jax.models.simple import as_nhwc


class CNN(nn.Module):
  """3 conv + 2 FC classifier; accepts ``[B, 28, 28]``, ``[B, 28, 28, 1]`` or ``[B, 784]``."""

  num_classes: int = 10
  conv_features: Sequence[int] = (32, 64, 64)
  kernel_size: int = 3
  pool_after: Sequence[bool] = (True, True, False)
  hidden_size: int = 128
  image_shape: Sequence[int] = (28, 28, 1)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = as_nhwc(x, self.image_shape)
    k = (self.kernel_size, self.kernel_size)
    for features, pool in zip(self.conv_features, self.pool_after, strict=True):
      x = nn.relu(nn.Conv(features, k, padding='SAME')(x))
      if pool:
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
    x = x.reshape(x.shape[0], -1)
    x = nn.relu(nn.Dense(self.hidden_size)(x))
    return nn.Dense(self.num_classes)(x)
