"""Flax models: logistic regression, MLP, the MasFL FMNIST CNN, CIFAR ResNet-18.

All are ``flax.linen`` modules used functionally: ``params = model.init(key, x)``,
``logits = model.apply(params, x)``; no mutable state (no BatchNorm).
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import numpy as np

from afl_jax.models.cnn import CNN
from afl_jax.models.resnet import BasicBlock, ResNet18
from afl_jax.models.simple import MLP, LogisticRegression
from afl_jax.registry import Registry

# A model's ``num_classes`` comes from the data; flax's ``parent`` and ``name`` are not settings.
MODELS = Registry('model', supplied=('num_classes', 'parent', 'name'))
MODELS.register('logreg', LogisticRegression)
MODELS.register('mlp', MLP)
MODELS.register('cnn', CNN)
MODELS.register('resnet18', ResNet18)


def get_model(name: str, num_classes: int, **kwargs: Any) -> nn.Module:
  """Returns the model registered as ``name``; ``kwargs`` go to its constructor.

  Raises:
    ValueError: for an unknown name (the message lists the valid names).
  """
  return MODELS.get(name)(num_classes=num_classes, **kwargs)


def count_params(params: Any) -> int:
  """Total number of scalar parameters in a pytree."""
  return int(sum(math.prod(np.shape(leaf)) for leaf in jax.tree_util.tree_leaves(params)))


__all__ = [
  'CNN',
  'MLP',
  'MODELS',
  'BasicBlock',
  'LogisticRegression',
  'ResNet18',
  'count_params',
  'get_model',
]
