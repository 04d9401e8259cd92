"""Top-k sparsification against a NumPy reference (stable argsort of -|x|)."""

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


def _compress(c, x, key=None):
  key = jax.random.key(0) if key is None else key
  return jax.jit(c.compress)(x, c.init(x), key)


@pytest.mark.parametrize('d,k', [(1, 1), (10, 3), (50, 1), (50, 17), (50, 50), (257, 40)])
def test_keeps_k_largest_magnitudes(d, k):
  rng = np.random.default_rng(d * 1000 + k)
  xs = (rng.standard_normal((64, d)) * rng.exponential(1.0, (64, 1))).astype(np.float32)
  c = compression.top_k(k=k)
  out, _, _ = jax.jit(jax.vmap(c.compress, in_axes=(0, None, None)))(
    jnp.asarray(xs), compression.EmptyState(), jax.random.key(0)
  )
  out = np.asarray(out)
  for x, o in zip(xs, out, strict=True):
    np.testing.assert_array_equal(o, np_top_k(x, k))
    assert np.count_nonzero(o) == k


def test_tie_break_lowest_index_first():
  x = jnp.array([0.5, -2.0, 2.0, 1.0, -2.0, 2.0], jnp.float32)
  out2, _, _ = _compress(compression.top_k(k=2), x)
  np.testing.assert_array_equal(np.asarray(out2), [0, -2.0, 2.0, 0, 0, 0])
  out3, _, _ = _compress(compression.top_k(k=3), x)
  np.testing.assert_array_equal(np.asarray(out3), [0, -2.0, 2.0, 0, -2.0, 0])


@pytest.mark.parametrize('d', [37, 1000, 20000])
def test_tie_break_many_ties_matches_stable_sort(d):
  rng = np.random.default_rng(d)
  for k in (1, d // 7, d // 2, d - 1):
    x = rng.integers(-3, 4, size=d).astype(np.float32)
    out, _, _ = _compress(compression.top_k(k=k), jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(out), np_top_k(x, k))


def test_contraction_bound_on_random_vectors():
  rng = np.random.default_rng(7)
  d = 40
  for k in (1, 5, 20, 39, 40):
    xs = np.concatenate(
      [
        rng.standard_normal((200, d)),
        rng.standard_t(1.5, (200, d)),  # heavy tails
        rng.standard_normal((200, d)) * (rng.random((200, d)) < 0.2),  # sparse
      ]
    ).astype(np.float32)
    c = compression.top_k(k=k)
    out, _, _ = jax.jit(jax.vmap(c.compress, in_axes=(0, None, None)))(
      jnp.asarray(xs), compression.EmptyState(), jax.random.key(0)
    )
    x64 = xs.astype(np.float64)
    err = np.sum((np.asarray(out, np.float64) - x64) ** 2, axis=1)
    bound = (1 - k / d) * np.sum(x64**2, axis=1)
    assert np.all(err <= bound * (1 + 1e-6) + 1e-30), (k, np.max(err - bound))


def test_global_over_pytree_leaves():
  # All of the largest entries live in the second leaf: a per-leaf top-k would fail.
  tree = {
    'a': jnp.array([[0.1, -0.2], [0.3, 0.05]], jnp.float32),
    'b': jnp.array([5.0, -4.0, 0.0, 3.0, 0.2], jnp.float32),
  }
  out, _, bits = _compress(compression.top_k(k=3), tree)
  np.testing.assert_array_equal(np.asarray(out['a']), np.zeros((2, 2)))
  np.testing.assert_array_equal(np.asarray(out['b']), [5.0, -4.0, 0.0, 3.0, 0.0])
  assert out['a'].shape == (2, 2) and out['a'].dtype == jnp.float32
  assert float(bits) == 3 * 32 + 3 * 4  # d = 9 -> ceil(log2 9) = 4


def test_tie_across_leaves_uses_flatten_order():
  tree = {'a': jnp.array([1.0, 2.0], jnp.float32), 'b': jnp.array([-2.0, 2.0], jnp.float32)}
  out, _, _ = _compress(compression.top_k(k=2), tree)
  # flat order: a0, a1, b0, b1 -> |.| = 1, 2, 2, 2 -> keep a1 and b0
  np.testing.assert_array_equal(np.asarray(out['a']), [0.0, 2.0])
  np.testing.assert_array_equal(np.asarray(out['b']), [-2.0, 0.0])


@pytest.mark.parametrize(
  'fraction,d,k',
  [
    (0.3, 10, 3),
    (0.25, 10, 3),
    (0.1, 10, 1),
    (0.01, 10, 1),
    (1.0, 10, 10),
    (0.7, 10, 7),
    (0.001, 12345, 13),
    (0.5, 1, 1),
    (0.07, 100, 7),
    (0.55, 100, 55),
    (0.29, 100, 29),
  ],
)
def test_k_rounding_is_ceil_at_least_one(fraction, d, k):
  assert compression.num_kept(fraction, d) == k
  x = jnp.asarray(np.random.default_rng(d).standard_normal(d) + 10.0, jnp.float32)  # no zeros
  out, _, bits = _compress(compression.top_k(fraction), x)
  assert np.count_nonzero(np.asarray(out)) == k
  assert float(bits) == k * (32 + int(np.ceil(np.log2(d))) if d > 1 else 32)


def test_zero_vector_and_float64():
  out, _, _ = _compress(compression.top_k(k=3), jnp.zeros(8, jnp.float32))
  np.testing.assert_array_equal(np.asarray(out), np.zeros(8))
  with jax.enable_x64(True):
    x = np.random.default_rng(3).standard_normal(30)
    out, _, bits = _compress(compression.top_k(0.2), jnp.asarray(x, jnp.float64))
    assert out.dtype == jnp.float64 and bits.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(out), np_top_k(x, 6))


@pytest.mark.parametrize(
  'kwargs,field',
  [
    ({'fraction': 0.0}, 'fraction'),
    ({'fraction': 1.5}, 'fraction'),
    ({'fraction': float('nan')}, 'fraction'),
    ({'k': 0}, 'k'),
    ({'k': 2.5}, 'k'),
    ({}, 'exactly one'),
    ({'fraction': 0.1, 'k': 3}, 'exactly one'),
  ],
)
def test_invalid_config(kwargs, field):
  with pytest.raises(ValueError, match=field):
    compression.top_k(**kwargs)
