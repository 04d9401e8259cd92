"""Deterministic sign quantizer: Sign(x)_i = 1{x_i >= 0} - 1{x_i < 0} (paper 004 Sec. III-B).

The paper applies Sign to Delta = x_K - x_start (eq. 3); library messages are
m = -Delta, so the compressor must send -Sign(-m): m_i = 0 -> -1 (Delta_i -> +1).
"""

import jax
import jax.numpy as jnp
import numpy as np
from compression_top_k_test import _compress

from afl_jax import compression


def test_paper_operator_zero_maps_to_plus_one():
  x = np.array([-1.5, 0.0, 2.0, -0.0, 1e-30, -1e-30, -7.0], np.float32)
  out = compression.paper_sign(jnp.asarray(x))
  np.testing.assert_array_equal(np.asarray(out), [-1, 1, 1, 1, 1, -1, -1])


def test_unscaled_is_paper_sign_of_delta_zero_update_maps_to_minus_one():
  m = np.array([-1.5, 0.0, 2.0, -0.0, 1e-30, -1e-30, -7.0], np.float32)  # m = -Delta
  out, state, bits = _compress(compression.sign(), jnp.asarray(m))
  delta = -m.astype(np.float64)
  np.testing.assert_array_equal(np.asarray(out), -np.where(delta >= 0, 1.0, -1.0))
  np.testing.assert_array_equal(np.asarray(out), [-1, -1, 1, -1, 1, -1, -1])
  assert out.dtype == jnp.float32
  assert state == compression.EmptyState()
  assert float(bits) == 7


def test_unscaled_random_matches_numpy():
  rng = np.random.default_rng(0)
  x = rng.standard_normal(1000).astype(np.float32) * (rng.random(1000) < 0.7)  # many zeros
  out, _, _ = _compress(compression.sign(), jnp.asarray(x))
  np.testing.assert_array_equal(np.asarray(out), np.where(x > 0, 1.0, -1.0))


def test_scaled_uses_l1_over_whole_pytree():
  tree = {
    'a': jnp.array([[1.0, -2.0], [0.0, 4.0]], jnp.float32),
    'b': jnp.array([-3.0], jnp.float32),
  }
  out, _, bits = _compress(compression.sign(scaled=True), tree)
  alpha = (1 + 2 + 0 + 4 + 3) / 5  # ||x||_1 / d over both leaves
  np.testing.assert_allclose(np.asarray(out['a']), alpha * np.array([[1, -1], [-1, 1]]), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(out['b']), [-alpha], rtol=1e-6)
  assert float(bits) == 5 + 32


def test_scaled_zero_vector_is_zero_and_float64():
  out, _, _ = _compress(compression.sign(scaled=True), jnp.zeros(4, jnp.float32))
  np.testing.assert_array_equal(np.asarray(out), np.zeros(4))
  with jax.enable_x64(True):
    x = np.random.default_rng(1).standard_normal(9)
    out, _, _ = _compress(compression.sign(scaled=True), jnp.asarray(x, jnp.float64))
    assert out.dtype == jnp.float64
    np.testing.assert_allclose(
      np.asarray(out), np.abs(x).mean() * np.where(x > 0, 1.0, -1.0), rtol=1e-14
    )
