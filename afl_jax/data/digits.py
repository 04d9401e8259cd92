"""scikit-learn's 8x8 handwritten digits (UCI optdigits test set, 1,797 images, 10 classes).

Small enough for fast end-to-end tests. Pixel values 0..16 are scaled to ``[0, 1]``.
"""

from __future__ import annotations

import numpy as np

from afl_jax.data.base import ArrayDataset


def digit_images() -> tuple[np.ndarray, np.ndarray]:
  """All 1,797 digits: ``(float64[1797, 8, 8] in [0, 1], int32[1797] labels)``."""
  from sklearn.datasets import load_digits as _sk_load_digits

  bunch = _sk_load_digits()
  return np.asarray(bunch.images, np.float64) / 16.0, np.asarray(bunch.target, np.int32)


def load_digits(*, test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
  """Loads the digits dataset with a deterministic, seeded train/test split.

  Args:
    test_fraction: fraction of the 1,797 samples held out for testing, in ``(0, 1)``.
    seed: seed of the split permutation (same seed -> same split).

  Returns:
    `ArrayDataset` with float32 images ``[n, 8, 8]`` in ``[0, 1]`` and int32 labels.
  """
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f'test_fraction={test_fraction!r} must be in the open interval (0, 1)')
  images, y = digit_images()
  x = images.astype(np.float32)
  perm = np.random.default_rng(seed).permutation(len(y))
  n_test = int(round(test_fraction * len(y)))
  test, train = perm[:n_test], perm[n_test:]
  return ArrayDataset(x[train], y[train], x[test], y[test], 10)
