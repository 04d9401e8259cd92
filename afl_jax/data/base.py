"""Shared types of `afl_jax.data`: the error type and the centralized dataset tuple."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from afl_jax.errors import UserError


class DataError(UserError):
  """A dataset file is missing, corrupt or inconsistent.

  The message always names the file (or directory) and what is wrong with it.
  """


class ArrayDataset(NamedTuple):
  """A centralized (not yet federated) classification dataset held in host memory.

  Attributes:
    train_x: training inputs, ``[n_train, ...]`` (uint8 images or float32 features).
    train_y: int32 ``[n_train]`` labels in ``[0, num_classes)``.
    test_x: test inputs, ``[n_test, ...]``, same dtype and trailing shape as ``train_x``.
    test_y: int32 ``[n_test]`` labels.
    num_classes: number of classes.
  """

  train_x: np.ndarray
  train_y: np.ndarray
  test_x: np.ndarray
  test_y: np.ndarray
  num_classes: int


def normalizer(train_x: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
  """Returns ``f(x) -> float32`` normalizing inputs like ``train_x``.

  uint8 images are scaled to ``[0, 1]`` and standardized with the scalar pixel mean and
  standard deviation of the whole training split (a fixed function of the dataset, not of
  the seed or partition). Floating-point inputs (digits, synthetic) are already normalized
  by their loaders and are only cast to float32.
  """
  if train_x.dtype != np.uint8:
    return lambda x: np.asarray(x, dtype=np.float32)
  # Exact statistics from the 256-bin pixel histogram (no float copy of the images).
  counts = np.bincount(train_x.ravel(), minlength=256).astype(np.float64)
  values = np.arange(256) / 255.0
  mean = float(counts @ values / counts.sum())
  std = float(np.sqrt(counts @ (values - mean) ** 2 / counts.sum())) or 1.0
  return lambda x: ((np.asarray(x, np.float32) / 255.0 - mean) / std).astype(np.float32)
