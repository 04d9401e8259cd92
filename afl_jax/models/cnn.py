"""The Fashion-MNIST CNN of the MasFL/AdaMasFL experiments.

Yan, Zhong, Wang & Zhang, "Momentum-Driven Adaptivity: Towards Tuning-Free Asynchronous
Federated Learning", Sec. 5 and App. E.1: "For FMNIST, we utilize a convolutional neural
network (CNN) consisting of three convolutional layers and two fully connected layers."
The paper gives no widths, kernels or pooling, so this module *chooses* a standard one
(our choice, not the paper's):

=======  ===========================================  ==============
layer    operation                                    output (28x28)
=======  ===========================================  ==============
conv1    3x3 conv, 32 channels, SAME, ReLU, 2x2 max   14x14x32
conv2    3x3 conv, 64 channels, SAME, ReLU, 2x2 max   7x7x64
conv3    3x3 conv, 64 channels, SAME, ReLU            7x7x64
fc1      Dense 128, ReLU                              128
fc2      Dense num_classes (logits)                   10
=======  ===========================================  ==============

Parameters for 28x28x1 input and 10 classes: 320 + 18,496 + 36,928 + 401,536 + 1,290
= 458,570. Widths are attributes, so another reading can be configured.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax

from afl_jax.models._inputs import as_nhwc


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
