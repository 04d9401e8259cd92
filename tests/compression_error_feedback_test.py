"""Error feedback (paper eqs. 8-9): sent = C(Delta + e), e <- e + Delta - sent."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compression_top_k_test import np_top_k

from afl_jax import compression

T = 20


def _deltas(seed, t=T):
  rng = np.random.default_rng(seed)
  return [
    {
      'w': rng.standard_normal((3, 4)).astype(np.float32),
      'b': (0.1 * rng.standard_normal(5)).astype(np.float32),
    }
    for _ in range(t)
  ]


def _flat(tree):
  return np.concatenate([np.ravel(tree['b']), np.ravel(tree['w'])])  # jax order: sorted keys


def _run(c, deltas, seed=0):
  step = jax.jit(c.compress)
  state = c.init(jax.tree.map(jnp.asarray, deltas[0]))
  sents = []
  for t, delta in enumerate(deltas):
    sent, state, _ = step(jax.tree.map(jnp.asarray, delta), state, jax.random.key(seed + t))
    sents.append(sent)
  return sents, state


def test_top_k_ef_matches_numpy_recursion():
  deltas = _deltas(0)
  k = 4
  sents, state = _run(compression.error_feedback(compression.top_k(k=k)), deltas)
  e = np.zeros(17, np.float32)
  for delta, sent in zip(deltas, sents, strict=True):
    corrected = _flat(delta) + e  # float32 arithmetic, as in the paper's eq. (8)
    ref = np_top_k(corrected, k)
    e = corrected - ref  # eq. (9): e + Delta - sent
    np.testing.assert_allclose(_flat(jax.tree.map(np.asarray, sent)), ref, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(_flat(jax.tree.map(np.asarray, state.residual)), e, atol=1e-6)


@pytest.mark.parametrize(
  'inner',
  [
    compression.top_k(0.2),
    compression.sign(),
    compression.sign(scaled=True),
    compression.qsgd(bits=3),
    compression.top_k_qsgd(0.3, 4),
  ],
  ids=['top_k', 'sign', 'sign_scaled', 'qsgd', 'top_k_qsgd'],
)
def test_telescoping_identity(inner):
  deltas = _deltas(1)
  sents, state = _run(compression.error_feedback(inner), deltas)
  total_delta = np.sum([_flat(d).astype(np.float64) for d in deltas], axis=0)
  total_sent = np.sum([_flat(jax.tree.map(np.asarray, s)).astype(np.float64) for s in sents], 0)
  e_t = _flat(jax.tree.map(np.asarray, state.residual)).astype(np.float64)
  scale = max(np.abs(total_delta).max(), np.abs(e_t).max(), 1.0)
  np.testing.assert_allclose(total_sent + e_t, total_delta, atol=T * 1e-6 * scale)
  # e_T is not trivially zero for a lossy compressor (so the check has teeth).
  assert np.abs(e_t).max() > 1e-3


def test_identity_ef_sends_delta_exactly_and_residual_stays_zero():
  deltas = _deltas(2, t=5)
  sents, state = _run(compression.error_feedback(compression.identity()), deltas)
  for delta, sent in zip(deltas, sents, strict=True):
    for name in ('w', 'b'):
      np.testing.assert_array_equal(np.asarray(sent[name]), delta[name])
  for leaf in jax.tree.leaves(state.residual):
    assert np.all(np.asarray(leaf) == 0)


def test_uses_given_residual_and_keeps_structure():
  c = compression.error_feedback(compression.top_k(k=1))
  delta = {'b': jnp.array([1.0, 0.0], jnp.float32), 'w': jnp.array([[0.5]], jnp.float32)}
  state0 = c.init(delta)
  assert jax.tree.structure(state0.residual) == jax.tree.structure(delta)
  state = state0._replace(residual={'b': jnp.array([0.0, -3.0]), 'w': jnp.array([[0.25]])})
  sent, new, bits = jax.jit(c.compress)(delta, state, jax.random.key(0))
  # corrected = [1, -3, 0.75] -> keep -3
  np.testing.assert_array_equal(np.asarray(sent['b']), [0.0, -3.0])
  np.testing.assert_array_equal(np.asarray(sent['w']), [[0.0]])
  np.testing.assert_array_equal(np.asarray(new.residual['b']), [1.0, 0.0])
  np.testing.assert_array_equal(np.asarray(new.residual['w']), [[0.75]])
  assert float(bits) == 32 + 2  # d = 3, k = 1


def test_mixed_dtypes_under_x64(x64):
  delta = {'a': jnp.arange(4.0, dtype=jnp.float64) - 1.5, 'b': jnp.ones(3, jnp.float32)}
  c = compression.error_feedback(compression.top_k(k=2))
  sent, state, _ = jax.jit(c.compress)(delta, c.init(delta), jax.random.key(0))
  assert sent['a'].dtype == jnp.float64 and sent['b'].dtype == jnp.float32
  assert state.residual['a'].dtype == jnp.float64 and state.residual['b'].dtype == jnp.float32
  # |.| = 1.5, .5, .5, 1.5, 1, 1, 1 -> keep a0 and a3
  np.testing.assert_array_equal(np.asarray(sent['a']), [-1.5, 0, 0, 1.5])
  np.testing.assert_array_equal(np.asarray(state.residual['b']), [1, 1, 1])
