"""scikit-learn's 8x8 digits (UCI optdigits test set, 1,797 images), pixels scaled to [0, 1]."""

from __future__ import annotations

import numpy as np

from afl_jax.data.base import ArrayDataset


def digit_images() -> tuple[np.ndarray, np.ndarray]:
  from sklearn.datasets import load_digits as _sk_load_digits

  bunch = _sk_load_digits()
  return np.asarray(bunch.images, np.float64) / 16.0, np.asarray(bunch.target, np.int32)


def load_digits(*, test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
  """The digits with a train/test split seeded by ``seed``."""
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f'test_fraction={test_fraction!r} must be in the open interval (0, 1)')
  images, y = digit_images()
  x = images.astype(np.float32)
  perm = np.random.default_rng(seed).permutation(len(y))
  n_test = int(round(test_fraction * len(y)))
  test, train = perm[:n_test], perm[n_test:]
  return ArrayDataset(x[train], y[train], x[test], y[test], 10)
