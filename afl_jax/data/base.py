"""Shared types of `afl_jax.data`: the error type and the centralized dataset tuple."""

from __future__ import annotations

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
