"""Flax models: ``MODELS`` maps a config's ``model`` to ``factory(num_classes=, **model_args)``
(``make``, ``names``, ``settings``); :func:`fast_apply` runs convolutions and non-overlapping
pooling at XLA:CPU's rate (the pipeline wraps every model's apply in it)."""

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
SHAPE = checks.integers(1)  # positive integers: a shape, the widths of layers
MODELS.register('mlp', MLP, hidden_sizes=SHAPE)
_INT1 = checks.integer(1)  # an integer >= 1 (checks.POSITIVE is a real > 0)
MODELS.register(
  'cnn', CNN, conv_features=SHAPE, kernel_size=_INT1, hidden_size=_INT1, image_shape=SHAPE
)
MODELS.register(
  'resnet18', ResNet18, stage_features=SHAPE, blocks_per_stage=SHAPE, norm_groups=_INT1,
  image_shape=SHAPE,
)  # fmt: skip


make, names, settings, register = MODELS.verbs()


def count_params(params: Any) -> int:
  """Number of scalars in a parameter tree (arrays or shape structs)."""
  return sum(int(x.size) for x in jax.tree.leaves(params))


# fmt: off
__all__ = [
  'CNN', 'MLP', 'MODELS', 'BasicBlock', 'LogisticRegression', 'ResNet18', 'count_params', 'fast',
  'fast_apply', 'make', 'names', 'register', 'settings', 'winograd',
]
# fmt: on
