"""Flax models: logistic regression, MLP, the MasFL FMNIST CNN, CIFAR ResNet-18.

All are ``flax.linen`` modules used functionally: ``params = model.init(key, x)``,
``logits = model.apply(params, x)``; no mutable state (no BatchNorm).

``MODELS`` (a :class:`~afl_jax.registry.Registry`, like every component a config
names) maps a config's ``model`` name to a factory called as
``factory(num_classes=..., **config.model_args) -> flax.linen.Module``: its keyword
arguments other than ``num_classes`` (from the data) are the model's settings
(``config.model_args``, e.g. the MLP's ``hidden_sizes``), their ranges declared at
registration.

:func:`fast_apply` wraps a model's apply (or any function of it) so that convolutions and
non-overlapping pooling run as matrix products where that is faster (CPU): the pipeline
trains every model through it; call it yourself when building a problem directly, e.g.
``problems.from_loss(lambda p, b: loss(fast_apply(model.apply)(p, b[0]), b[1]), ...)``.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import numpy as np

from afl_jax import ranges as checks
from afl_jax.models import fast
from afl_jax.models.cnn import CNN
from afl_jax.models.fast import fast_apply
from afl_jax.models.resnet import BasicBlock, ResNet18
from afl_jax.models.simple import MLP, LogisticRegression
from afl_jax.registry import Registry

# A model's ``num_classes`` comes from the data; flax's ``parent`` and ``name`` are not settings.
MODELS = Registry('model', section='model_args', supplied=('num_classes', 'parent', 'name'))
MODELS.register('logreg', LogisticRegression)
MODELS.register('mlp', MLP, hidden_sizes=checks.integers(1))
SHAPE = checks.integers(1)  # an image's (height, width, channels)
MODELS.register(
  'cnn',
  CNN,
  conv_features=checks.integers(1),
  kernel_size=checks.integer(1),
  hidden_size=checks.integer(1),
  image_shape=SHAPE,
)
MODELS.register(
  'resnet18',
  ResNet18,
  stage_features=checks.integers(1),
  blocks_per_stage=checks.integers(1),
  norm_groups=checks.integer(1),
  image_shape=SHAPE,
)


def get_model(name: str, num_classes: int, **kwargs: Any) -> nn.Module:
  """Returns the model registered as ``name``; ``kwargs`` (its settings, e.g. a config's
  ``model_args``; lists are passed as tuples) go to its constructor.

  Raises:
    ValueError: for an unknown name (the message lists the valid names).
  """
  kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
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
  'fast',
  'fast_apply',
  'get_model',
]
