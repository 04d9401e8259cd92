"""QSGD (Alistarh et al. 2017) and Q_s(Top_k), checked statistically against NumPy math.

For x != 0 let r_i = s|x_i|/||x||, l_i = floor(r_i), p_i = r_i - l_i.  Each
coordinate of Q_s(x) is ||x|| sgn(x_i) l_i/s w.p. 1-p_i and ||x|| sgn(x_i) (l_i+1)/s
w.p. p_i, so E Q = x and Var Q_i = (||x||/s)^2 p_i (1-p_i).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afl_jax import compression

N_DRAWS = 20000  # draws per statistical test, via vmap over keys
Z = 5.0  # tolerance in standard errors (per coordinate)


def _draws(c, x, n=N_DRAWS, seed=0):
  keys = jax.random.split(jax.random.key(seed), n)
  state = c.init(x)
  out, _, bits = jax.jit(jax.vmap(c.compress, in_axes=(None, None, 0)))(x, state, keys)
  return out, bits


def _np_levels(x, s):
  norm = np.linalg.norm(x)
  r = s * np.abs(x) / norm
  low = np.floor(r)
  return norm, r, low, r - low


def _vector(d, seed):
  rng = np.random.default_rng(seed)
  return (rng.standard_normal(d) * rng.exponential(1.0, d)).astype(np.float32)


@pytest.mark.parametrize('bits,s', [(2, 1), (3, 3), (4, 7), (6, 31)])
def test_qsgd_levels_mean_variance_and_bound(bits, s):
  """Q_s(x)_i = ||x|| sgn(x_i) l/s at l_i or l_i + 1; E Q = x; Var Q_i = (||x||/s)^2 p(1-p);
  E||Q - x||^2 <= min(d/s^2, sqrt(d)/s) ||x||^2; 32 + d * bits bits sent."""
  d = 32
  x = _vector(d, bits)
  out, bits_sent = _draws(compression.qsgd(bits=bits), jnp.asarray(x))
  np.testing.assert_array_equal(np.asarray(bits_sent), 32 + d * bits)
  q, x64 = np.asarray(out, np.float64), x.astype(np.float64)
  norm, _, low, p = _np_levels(x64, s)
  level = np.abs(q) * s / norm
  np.testing.assert_allclose(level, np.round(level), atol=1e-4)  # on the grid ||x|| l / s
  lv = np.round(level)
  assert np.all((lv == low) | (lv == low + 1)) and np.all(lv <= s)
  assert np.all((q == 0) | (np.sign(q) == np.sign(x)))
  tol = Z * (norm / s) * np.sqrt(p * (1 - p) / N_DRAWS) + 1e-6 * norm
  assert np.all(np.abs(q.mean(0) - x) <= tol), np.max(np.abs(q.mean(0) - x) / tol)
  # The empirical variance c^2 ph(1-ph), c = ||x||/s, matches c^2 p(1-p): since
  # |ph(1-ph) - p(1-p)| <= |ph - p|, the same Z standard errors bound it.
  c2 = (norm / s) ** 2
  var_tol = c2 * Z * np.sqrt(p * (1 - p) / N_DRAWS) + 1e-5 * norm**2
  assert np.all(np.abs(q.var(0) - c2 * p * (1 - p)) <= var_tol)
  sq_err = np.sum((q - x64) ** 2, axis=1)
  exact, bound = np.sum(c2 * p * (1 - p)), min(d / s**2, np.sqrt(d) / s) * norm**2
  assert exact <= bound  # the math itself
  # Empirical mean within Z standard errors of the exact value, hence below the bound.
  assert abs(sq_err.mean() - exact) <= Z * sq_err.std() / np.sqrt(len(sq_err)) + 1e-6 * norm**2
  assert sq_err.mean() <= bound


def test_zero_vector_maps_to_zero():
  for c in (compression.qsgd(bits=3), compression.top_k_qsgd(0.5, 3)):
    tree = {'a': jnp.zeros((3, 2), jnp.float32), 'b': jnp.zeros(4, jnp.float32)}
    out, _, _ = jax.jit(c.compress)(tree, c.init(tree), jax.random.key(1))
    for leaf in jax.tree.leaves(out):
      assert np.all(np.asarray(leaf) == 0) and np.all(np.isfinite(np.asarray(leaf)))


def test_one_hot_is_exact():
  x = jnp.zeros(16, jnp.float32).at[5].set(-3.0)
  out, _ = _draws(compression.qsgd(bits=2), x, n=100)
  np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(np.asarray(x), (100, 16)))


def test_float64(x64):
  x = np.random.default_rng(5).standard_normal(12)
  out, bits = _draws(compression.qsgd(bits=4), jnp.asarray(x, jnp.float64), n=4000)
  assert out.dtype == jnp.float64
  np.testing.assert_array_equal(np.asarray(bits), 32 + 12 * 4)
  level = np.abs(np.asarray(out)) * 7 / np.linalg.norm(x)  # s = 2^3 - 1
  np.testing.assert_allclose(level, np.round(level), atol=1e-9)


def test_top_k_qsgd_quantizes_kept_values_unbiasedly():
  x = _vector(20, 99)
  k, b, s = 6, 3, 3
  out, bits = _draws(compression.top_k_qsgd(k / 20, bits=b), jnp.asarray(x))
  q = np.asarray(out, np.float64)
  keep = np.argsort(-np.abs(x), kind='stable')[:k]
  mask = np.zeros(20, bool)
  mask[keep] = True
  assert np.all(q[:, ~mask] == 0)
  kept = x[keep].astype(np.float64)
  norm, _, low, p = _np_levels(kept, s)  # norm of the KEPT vector
  level = np.abs(q[:, keep]) * s / norm
  np.testing.assert_allclose(level, np.round(level), atol=1e-4)
  lv = np.round(level)
  assert np.all((lv == low) | (lv == low + 1))
  tol = Z * (norm / s) * np.sqrt(p * (1 - p) / N_DRAWS) + 1e-6 * norm
  assert np.all(np.abs(q[:, keep].mean(0) - kept) <= tol)
  # d = 20 -> ceil(log2 20) = 5; 32 + k (b + 5)
  np.testing.assert_array_equal(np.asarray(bits), 32 + 6 * (3 + 5))


def test_scaled_top_k_qsgd_is_the_unscaled_operator_over_one_plus_beta():
  x = {'a': jnp.asarray(np.random.default_rng(3).normal(size=500), jnp.float32)}
  k, s = 25, 7
  key = jax.random.key(5)
  plain = compression.top_k_qsgd(k / 500, bits=4)
  scaled = compression.top_k_qsgd(k / 500, bits=4, scaled=True)
  out_p, _, bits_p = plain.compress(x, plain.init(x), key)
  out_s, _, bits_s = scaled.compress(x, scaled.init(x), key)
  beta = min(k / s**2, math.sqrt(k) / s)
  np.testing.assert_allclose(out_s['a'], np.asarray(out_p['a']) / (1 + beta), rtol=1e-6)
  assert float(bits_p) == float(bits_s)
  # Contraction in expectation (Basu et al. Lemma): E||C(x) - x||^2 <= (1 - k/(d(1+beta)))||x||^2,
  # checked on the mean of 2000 draws (the bound has slack well above the sampling error).
  keys = jax.random.split(jax.random.key(0), 2000)
  outs = jax.vmap(lambda kk: scaled.compress(x, scaled.init(x), kk)[0]['a'])(keys)
  err = float(jnp.mean(jnp.sum((outs - x['a']) ** 2, axis=1)))
  bound = (1 - k / (500 * (1 + beta))) * float(jnp.sum(x['a'] ** 2))
  assert err <= bound
