"""Comparing two programs that compute the same numbers in a different way.

Bit-for-bit equality is asserted only where one program replays the same inputs (a
resumed run, the same config and seed). Two programs that do the same arithmetic with
other shapes (another block width, a padded or grouped batch, a term that is zero) may
round differently: XLA chooses reduction orders, vector widths and fused multiply-adds
per shape and per CPU model, so such results agree to a few ulps of the values' scale,
not bit for bit, and :func:`assert_close_ulps` is the check for them.
"""

import numpy as np


def assert_close_ulps(actual, desired, *, ulps: float = 8, err_msg: str = '') -> None:
  """Within ``ulps`` units in the last place of the values' scale; integers exactly.

  rtol is ``ulps * eps(dtype)`` and atol is ``ulps * eps(dtype) * max|desired|``: an entry
  near zero is held to the round-off of the largest value it was computed with.
  """
  actual, desired = np.asarray(actual), np.asarray(desired)
  if not np.issubdtype(desired.dtype, np.inexact):
    np.testing.assert_array_equal(actual, desired, err_msg=err_msg)
    return
  eps = float(np.finfo(desired.dtype).eps)
  scale = float(np.max(np.abs(desired), initial=0.0))
  np.testing.assert_allclose(
    actual, desired, rtol=ulps * eps, atol=ulps * eps * scale, err_msg=err_msg
  )
