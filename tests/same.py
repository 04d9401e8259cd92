"""Equality of two computations of the same thing, as exact as the backend allows.

XLA:CPU gives bit-for-bit equal results where the tests claim it (the same products
in another block width, a no-op term). An accelerator's kernels are chosen by shape
and fuse multiply-adds differently, so there the same claims hold to round-off.
"""

import jax
import numpy as np


def assert_same(actual, desired, *, err_msg: str = '') -> None:
  """Bit for bit on CPU; elsewhere within a few ulps of the dtype (rtol 8 eps)."""
  actual, desired = np.asarray(actual), np.asarray(desired)
  if jax.default_backend() == 'cpu':
    np.testing.assert_array_equal(actual, desired, err_msg=err_msg)
  else:
    eps = np.finfo(desired.dtype).eps if np.issubdtype(desired.dtype, np.floating) else 0
    np.testing.assert_allclose(actual, desired, rtol=8 * eps, atol=8 * eps, err_msg=err_msg)
