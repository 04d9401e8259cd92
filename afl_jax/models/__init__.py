"""Flax models used functionally (no mutable state): ``MODELS`` maps a config's ``model`` to
``factory(num_classes=, **model_args) -> nn.Module`` (``make(name, num_classes=C, **settings)``,
``names()``, ``settings(name)``); :func:`fast_apply` runs convolutions and non-overlapping
pooling at XLA:CPU's rate (the pipeline trains every model through it; wrap ``model.apply``
yourself when building a problem directly)."""

from __future__ import annotations

from typing import Any

import jax

from afl_jax import checks
from afl_jax.models import fast, winograd
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


make, names, settings, register = MODELS.verbs()


def count_params(params: Any) -> int:
  """Number of scalars in a parameter tree (arrays or shape structs)."""
  return sum(int(x.size) for x in jax.tree.leaves(params))


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
  'make',
  'names',
  'register',
  'settings',
  'winograd',
]
