"""Compressors (Yang, Hou, Wu, Sec. III-B, Alg. 1) against NumPy references: Top-k (ties to
the lowest flat index), Sign (``0 -> +1`` on the paper's Delta = -m), error feedback (eqs.
8-9) and bit counts by hand. Per-client residuals through the engine: asynfl_replay_test.py."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afl_jax import compression


def np_top_k(x: np.ndarray, k: int) -> np.ndarray:
  """Keep the k largest |x|; ties -> lowest index (stable sort)."""
  keep = np.argsort(-np.abs(x), kind='stable')[:k]
  out = np.zeros_like(x)
  out[keep] = x[keep]
  return out


def top_k(k: int, d: int) -> compression.Compressor:
  return compression.top_k(k / d)  # keeps exactly k of d (num_kept's ceil with slack)


def _compress(c, x, key=None):
  return jax.jit(c.compress)(x, c.init(x), jax.random.key(0) if key is None else key)


def _batch(c, xs):
  return jax.jit(jax.vmap(c.compress, in_axes=(0, None, None)))(
    jnp.asarray(xs), compression.EmptyState(), jax.random.key(0)
  )[0]


X10 = jnp.linspace(-1.0, 2.0, 10, dtype=jnp.float32)


@pytest.mark.parametrize(
  'c,expected',
  [
    (compression.identity(), 320),  # 32 * 10
    (compression.top_k(0.3), 108),  # 3*32 + 3*ceil(log2 10) = 96 + 12
    (compression.sign(), 10),
    (compression.sign(scaled=True), 42),
    (compression.qsgd(bits=4), 72),  # 32 + 10*4
    (compression.qsgd(bits=2), 52),
    (compression.top_k_qsgd(0.3, bits=4), 56),  # 32 + 3*(4 + 4)
    (compression.error_feedback(compression.top_k(0.3)), 108),
    (compression.error_feedback(compression.make('top_k_qsgd', fraction=0.3)), 56),
  ],
)
def test_bits_by_hand_d10(c, expected):
  _, _, bits = _compress(c, X10)
  assert bits.shape == () and bits.dtype == jnp.float32 and float(bits) == expected


def test_bits_index_width_edges():
  assert float(_compress(top_k(1, 1), jnp.ones(1))[2]) == 32  # ceil(log2 1) = 0
  assert float(_compress(top_k(2, 16), jnp.ones(16))[2]) == 2 * (32 + 4)
  assert float(_compress(top_k(2, 17), jnp.ones(17))[2]) == 2 * (32 + 5)
  tree = {'a': jnp.ones((10, 10)), 'b': jnp.ones(28)}  # d = 128 -> 7 index bits
  assert float(_compress(top_k(5, 128), tree)[2]) == 5 * (32 + 7)
  assert [compression.index_bits(d) for d in (1, 2, 3, 4, 5, 1024, 1025)] == [0, 1, 2, 2, 3, 10, 11]
  assert compression.dense_bits(tree) == 32 * 128 == compression.identity_bits(128)


@pytest.mark.parametrize(
  'd,k', [(1, 1), (6, 5), (10, 3), (37, 5), (50, 1), (50, 17), (50, 50), (257, 40), (20000, 2857)]
)
def test_top_k_keeps_k_largest_magnitudes_ties_to_the_lowest_index(d, k):
  rng = np.random.default_rng(d * 1000 + k)
  xs = np.concatenate(  # continuous magnitudes, and integers in [-3, 3] (mostly ties)
    [rng.standard_normal((8, d)) * rng.exponential(1.0, (8, 1)), rng.integers(-3, 4, (8, d))]
  ).astype(np.float32)
  for x, o in zip(xs, np.asarray(_batch(top_k(k, d), xs)), strict=True):
    np.testing.assert_array_equal(o, np_top_k(x, k))


def test_top_k_is_global_over_the_pytree_and_contracts():
  tree = {'a': jnp.array([[0.1, -0.2], [0.3, 0.05]]), 'b': jnp.array([5.0, -4.0, 0.0, 3.0, 0.2])}
  out, _, bits = _compress(top_k(3, 9), tree)  # a per-leaf top-k would keep some of 'a'
  np.testing.assert_array_equal(out['a'], np.zeros((2, 2)))
  np.testing.assert_array_equal(out['b'], [5.0, -4.0, 0.0, 3.0, 0.0])
  assert float(bits) == 3 * 32 + 3 * 4
  # Ties across leaves, in flatten order a0, a1, b0, b1 (|.| = 1, 2, 2, 2): a1 and b0.
  out, _, _ = _compress(top_k(2, 4), {'a': jnp.array([1.0, 2.0]), 'b': jnp.array([-2.0, 2.0])})
  np.testing.assert_array_equal(out['a'], [0.0, 2.0])
  np.testing.assert_array_equal(out['b'], [-2.0, 0.0])
  rng, d = np.random.default_rng(7), 40
  xs = np.concatenate(
    [
      rng.standard_normal((200, d)),
      rng.standard_t(1.5, (200, d)),  # heavy tails
      rng.standard_normal((200, d)) * (rng.random((200, d)) < 0.2),  # sparse
    ]
  ).astype(np.float32)
  for k in (1, 5, 20, 39, 40):  # ||Top_k(x) - x||^2 <= (1 - k/d) ||x||^2
    x64 = xs.astype(np.float64)
    err = np.sum((np.asarray(_batch(top_k(k, d), xs), np.float64) - x64) ** 2, axis=1)
    assert np.all(err <= (1 - k / d) * np.sum(x64**2, axis=1) * (1 + 1e-6) + 1e-30), k


@pytest.mark.parametrize(
  'fraction,d,k',
  [(0.3, 10, 3), (0.25, 10, 3), (0.01, 10, 1), (1.0, 10, 10), (0.7, 10, 7), (0.001, 12345, 13)]
  + [(0.5, 1, 1), (0.07, 100, 7), (0.55, 100, 55), (0.29, 100, 29)],
)
def test_top_k_keeps_ceil_fraction_d_at_least_one(fraction, d, k):
  assert compression.num_kept(fraction, d) == k
  x = jnp.asarray(np.random.default_rng(d).standard_normal(d) + 10.0, jnp.float32)  # no zeros
  out, _, _ = _compress(compression.top_k(fraction), x)
  assert np.count_nonzero(np.asarray(out)) == k


def test_top_k_zero_vector_and_float64(x64):
  np.testing.assert_array_equal(_compress(top_k(3, 8), jnp.zeros(8, jnp.float32))[0], np.zeros(8))
  x = np.random.default_rng(3).standard_normal(30)
  out, _, bits = _compress(compression.top_k(0.2), jnp.asarray(x, jnp.float64))
  assert out.dtype == jnp.float64 and bits.dtype == jnp.float32
  np.testing.assert_array_equal(out, np_top_k(x, 6))


def test_sign_is_the_papers_operator_on_delta():
  """Sign(x)_i = +1 for x_i >= 0 (0 and -0.0 too) on the paper's Delta = -m."""
  m = np.array([-1.5, 0.0, 2.0, -0.0, 1e-30, -1e-30, -7.0], np.float32)
  np.testing.assert_array_equal(compression.paper_sign(jnp.asarray(m)), [-1, 1, 1, 1, 1, -1, -1])
  out, state, bits = _compress(compression.sign(), jnp.asarray(m))
  np.testing.assert_array_equal(out, -np.where(-m.astype(np.float64) >= 0, 1.0, -1.0))
  assert out.dtype == jnp.float32 and state == compression.EmptyState() and float(bits) == 7
  rng = np.random.default_rng(0)
  x = rng.standard_normal(1000).astype(np.float32) * (rng.random(1000) < 0.7)  # many zeros
  out = _compress(compression.sign(), jnp.asarray(x))[0]
  np.testing.assert_array_equal(out, np.where(x > 0, 1.0, -1.0))


def test_scaled_sign_uses_l1_over_the_whole_pytree(x64):
  scaled = compression.sign(scaled=True)
  tree = {'a': jnp.array([[1.0, -2.0], [0.0, 4.0]]), 'b': jnp.array([-3.0])}
  out, _, bits = _compress(scaled, jax.tree.map(lambda v: v.astype(jnp.float32), tree))
  alpha = (1 + 2 + 0 + 4 + 3) / 5
  np.testing.assert_allclose(out['a'], alpha * np.array([[1, -1], [-1, 1]]), rtol=1e-6)
  np.testing.assert_allclose(out['b'], [-alpha], rtol=1e-6)
  assert float(bits) == 5 + 32
  np.testing.assert_array_equal(_compress(scaled, jnp.zeros(4))[0], np.zeros(4))
  x = np.random.default_rng(1).standard_normal(9)
  out, _, _ = _compress(scaled, jnp.asarray(x, jnp.float64))
  assert out.dtype == jnp.float64
  np.testing.assert_allclose(out, np.abs(x).mean() * np.where(x > 0, 1.0, -1.0), rtol=1e-14)


# ---- error feedback (eqs. 8-9) ------------------------------------------------------------
def _deltas(seed, t=20):
  rng = np.random.default_rng(seed)
  f32 = lambda *shape, scale=1.0: (scale * rng.standard_normal(shape)).astype(np.float32)
  return [{'w': f32(3, 4), 'b': f32(5, scale=0.1)} for _ in range(t)]


def _flat(tree):
  return np.concatenate([np.ravel(tree['b']), np.ravel(tree['w'])])  # jax order: sorted keys


def _run(c, deltas):
  step, state, sents = jax.jit(c.compress), c.init(jax.tree.map(jnp.asarray, deltas[0])), []
  for t, delta in enumerate(deltas):
    sent, state, _ = step(jax.tree.map(jnp.asarray, delta), state, jax.random.key(t))
    sents.append(jax.tree.map(np.asarray, sent))
  return sents, state


def test_top_k_error_feedback_matches_the_numpy_recursion():
  deltas, k = _deltas(0), 4
  sents, state = _run(compression.error_feedback(top_k(k, 17)), deltas)
  e = np.zeros(17, np.float32)
  for delta, sent in zip(deltas, sents, strict=True):
    corrected = _flat(delta) + e  # eq. (8), float32 as the paper's
    e = corrected - np_top_k(corrected, k)  # eq. (9)
    np.testing.assert_allclose(_flat(sent), np_top_k(corrected, k), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(_flat(jax.tree.map(np.asarray, state.residual)), e, atol=1e-6)


@pytest.mark.parametrize(
  'inner',
  [
    compression.top_k(0.2),
    compression.sign(),
    compression.sign(scaled=True),
    compression.qsgd(bits=3),
    compression.top_k_qsgd(0.3, 4),
    compression.identity(),
  ],
  ids=['top_k', 'sign', 'sign_scaled', 'qsgd', 'top_k_qsgd', 'identity'],
)
def test_error_feedback_telescopes(inner):
  """sum_t sent_t + e_T = sum_t Delta_t; the identity sends Delta exactly, e stays 0."""
  deltas = _deltas(1)
  sents, state = _run(compression.error_feedback(inner), deltas)
  total_delta = np.sum([_flat(d).astype(np.float64) for d in deltas], axis=0)
  total_sent = np.sum([_flat(s).astype(np.float64) for s in sents], 0)
  e_t = _flat(jax.tree.map(np.asarray, state.residual)).astype(np.float64)
  scale = max(np.abs(total_delta).max(), np.abs(e_t).max(), 1.0)
  np.testing.assert_allclose(total_sent + e_t, total_delta, atol=20 * 1e-6 * scale)
  lossy = any(not np.array_equal(_flat(s), _flat(d)) for s, d in zip(sents, deltas, strict=True))
  assert (np.abs(e_t).max() > 1e-3) == lossy  # e_T is 0 exactly when nothing was lost


def test_error_feedback_uses_the_residual_and_keeps_dtypes(x64):
  c = compression.error_feedback(top_k(1, 3))
  delta = {'b': jnp.array([1.0, 0.0], jnp.float32), 'w': jnp.array([[0.5]], jnp.float64)}
  state = c.init(delta)._replace(residual={'b': jnp.array([0.0, -3.0]), 'w': jnp.array([[0.25]])})
  sent, new, bits = jax.jit(c.compress)(delta, state, jax.random.key(0))
  np.testing.assert_array_equal(sent['b'], [0.0, -3.0])  # corrected [1, -3, 0.75]: keep -3
  np.testing.assert_array_equal(sent['w'], [[0.0]])
  np.testing.assert_array_equal(new.residual['b'], [1.0, 0.0])
  np.testing.assert_array_equal(new.residual['w'], [[0.75]])
  assert sent['w'].dtype == new.residual['w'].dtype == jnp.float64 and float(bits) == 32 + 2


# ---- QSGD ----
# QSGD (Alistarh et al. 2017) and Q_s(Top_k), checked statistically against NumPy math.
#
# For x != 0 let r_i = s|x_i|/||x||, l_i = floor(r_i), p_i = r_i - l_i.  Each
# coordinate of Q_s(x) is ||x|| sgn(x_i) l_i/s w.p. 1-p_i and ||x|| sgn(x_i) (l_i+1)/s
# w.p. p_i, so E Q = x and Var Q_i = (||x||/s)^2 p_i (1-p_i).
N_DRAWS = 20000  # draws per statistical test, via vmap over keys
Z = 5.0  # tolerance in standard errors (per coordinate)


def _draws(c, x, n=N_DRAWS, seed=0):
  keys = jax.random.split(jax.random.key(seed), n)
  state = c.init(x)
  out, _, bits = jax.jit(jax.vmap(c.compress, in_axes=(None, None, 0)))(x, state, keys)
  return out, bits


def _check_levels(q, x, s):
  """Draws ``q`` of ``Q_s(x)`` on the grid ``||x|| l / s`` at ``l_i`` or ``l_i + 1``, their mean
  within Z standard errors of ``x``; returns ``(||x||, p)``."""
  norm = np.linalg.norm(x)
  r = s * np.abs(x) / norm
  low = np.floor(r)
  p = r - low
  level = np.abs(q) * s / norm
  np.testing.assert_allclose(level, np.round(level), atol=1e-4)
  lv = np.round(level)
  assert np.all((lv == low) | (lv == low + 1)) and np.all(lv <= s)
  tol = Z * (norm / s) * np.sqrt(p * (1 - p) / N_DRAWS) + 1e-6 * norm
  assert np.all(np.abs(q.mean(0) - x) <= tol), np.max(np.abs(q.mean(0) - x) / tol)
  return norm, p


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
  norm, p = _check_levels(q, x64, s)
  assert np.all((q == 0) | (np.sign(q) == np.sign(x)))
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


def test_zero_one_hot_and_float64(x64):
  for c in (compression.qsgd(bits=3), compression.top_k_qsgd(0.5, 3)):
    tree = {'a': jnp.zeros((3, 2), jnp.float32), 'b': jnp.zeros(4, jnp.float32)}
    for leaf in jax.tree.leaves(_compress(c, tree, jax.random.key(1))[0]):
      assert np.all(np.asarray(leaf) == 0)
  x = jnp.zeros(16, jnp.float32).at[5].set(-3.0)  # one-hot: exact
  out, _ = _draws(compression.qsgd(bits=2), x, n=100)
  np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(np.asarray(x), (100, 16)))
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
  assert np.all(np.delete(q, keep, axis=1) == 0)
  _check_levels(q[:, keep], x[keep].astype(np.float64), s)  # Q_s of the KEPT vector
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
