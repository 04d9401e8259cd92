"""Multinomial logistic regression and the multilayer perceptron."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax

from afl_jax.models._inputs import flatten


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
