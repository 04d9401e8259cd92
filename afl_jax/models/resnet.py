"""CIFAR-style ResNet-18 (He et al., CVPR 2016) with GroupNorm (2 groups, Hsieh et al., ICML 2020)
for BatchNorm, whose batch statistics are ill-defined across non-iid clients; 11,173,962
parameters for 10 classes, no conv bias, He fan-out init."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from afl_jax.models.simple import as_nhwc

_conv_init = nn.initializers.variance_scaling(2.0, 'fan_out', 'normal')


class BasicBlock(nn.Module):
  """Two 3x3 convs with a residual connection (1x1 projection when the shape changes)."""

  features: int
  stride: int = 1
  norm_groups: int = 2

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    conv = lambda f, k, s: nn.Conv(
      f, (k, k), (s, s), padding='SAME', use_bias=False, kernel_init=_conv_init
    )
    norm = lambda: nn.GroupNorm(num_groups=self.norm_groups)
    y = nn.relu(norm()(conv(self.features, 3, self.stride)(x)))
    y = norm()(conv(self.features, 3, 1)(y))
    if self.stride != 1 or x.shape[-1] != self.features:
      x = norm()(conv(self.features, 1, self.stride)(x))
    return nn.relu(x + y)


class ResNet18(nn.Module):
  """CIFAR ResNet-18; input NHWC ``[B, 32, 32, 3]`` (or ``[B, H, W]``, or flat)."""

  num_classes: int = 10
  stage_features: Sequence[int] = (64, 128, 256, 512)
  blocks_per_stage: Sequence[int] = (2, 2, 2, 2)
  norm_groups: int = 2
  image_shape: Sequence[int] = (32, 32, 3)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = as_nhwc(x, self.image_shape)
    x = nn.Conv(
      self.stage_features[0], (3, 3), padding='SAME', use_bias=False, kernel_init=_conv_init
    )(x)
    x = nn.relu(nn.GroupNorm(num_groups=self.norm_groups)(x))
    for i, (features, blocks) in enumerate(
      zip(self.stage_features, self.blocks_per_stage, strict=True)
    ):
      for j in range(blocks):
        stride = 2 if i > 0 and j == 0 else 1
        x = BasicBlock(features, stride, self.norm_groups)(x)
    x = jnp.mean(x, axis=(1, 2))
    return nn.Dense(self.num_classes)(x)
