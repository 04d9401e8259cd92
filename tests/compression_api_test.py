"""Bit counts by hand, the registry, and jit/vmap over clients with per-client states."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compression_top_k_test import np_top_k

from afl_jax import compression


def _bits(c, x):
  _, _, bits = jax.jit(c.compress)(x, c.init(x), jax.random.key(0))
  assert bits.shape == () and bits.dtype == jnp.float32
  return float(bits)


X10 = jnp.linspace(-1.0, 2.0, 10, dtype=jnp.float32)


@pytest.mark.parametrize(
  'c,expected',
  [
    (compression.identity(), 320),  # 32 * 10
    (compression.top_k(k=3), 108),  # 3*32 + 3*ceil(log2 10) = 96 + 12
    (compression.top_k(0.3), 108),
    (compression.sign(), 10),
    (compression.sign(scaled=True), 42),
    (compression.qsgd(bits=4), 72),  # 32 + 10*4
    (compression.qsgd(levels=1), 52),  # b = 2
    (compression.top_k_qsgd(k=3, bits=4), 56),  # 32 + 3*(4 + 4)
    (compression.error_feedback(compression.top_k(k=3)), 108),
    (compression.error_feedback(compression.identity()), 320),
  ],
)
def test_bits_by_hand_d10(c, expected):
  assert _bits(c, X10) == expected


def test_bits_index_width_edges():
  assert _bits(compression.top_k(k=1), jnp.ones(1)) == 32  # ceil(log2 1) = 0
  assert _bits(compression.top_k(k=2), jnp.ones(16)) == 2 * (32 + 4)
  assert _bits(compression.top_k(k=2), jnp.ones(17)) == 2 * (32 + 5)
  tree = {'a': jnp.ones((10, 10)), 'b': jnp.ones(28)}  # d = 128 -> 7 index bits
  assert _bits(compression.top_k_qsgd(k=5, bits=8), tree) == 32 + 5 * (8 + 7)
  assert [compression.index_bits(d) for d in (1, 2, 3, 4, 5, 1024, 1025)] == [0, 1, 2, 2, 3, 10, 11]
  assert compression.dense_bits(tree) == 32 * 128 == compression.identity_bits(128)
  assert compression.tree_size(tree) == 128


def test_count_bytes_with_mask():
  bits = np.array([[108.0, 108.0, 108.0], [72.0, 72.0, 72.0]])
  mask = np.array([[True, False, True], [True, True, False]])
  assert compression.count_bytes(bits, mask) == (216 + 144) / 8
  assert compression.count_bytes(bits) == (324 + 216) / 8


@pytest.mark.parametrize(
  'name,kwargs',
  [
    ('identity', {}),
    ('top_k', {'fraction': 0.3}),
    ('sign', {'scaled': True}),
    ('qsgd', {'bits': 4}),
    ('top_k_qsgd', {'fraction': 0.3, 'bits': 4}),
  ],
)
def test_registry_builds_each_name(name, kwargs):
  expected = {'identity': 320, 'top_k': 108, 'sign': 42, 'qsgd': 72, 'top_k_qsgd': 56}[name]
  assert _bits(compression.get(name, **kwargs), X10) == expected
  c = compression.get(name, error_feedback=True, **kwargs)
  state = c.init(X10)
  assert isinstance(state, compression.ErrorFeedbackState)
  assert _bits(c, X10) == expected


def test_registry_errors():
  with pytest.raises(ValueError, match='topk') as err:
    compression.get('topk')
  assert all(name in str(err.value) for name in ('identity', 'top_k', 'sign', 'qsgd'))
  with pytest.raises(ValueError, match='top_k'):
    compression.get('top_k', frac=0.1)
  with pytest.raises(ValueError, match='bits'):
    compression.get('qsgd', bits=1)
  assert set(compression.NAMES) == {'identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd'}


def test_vmap_jit_over_clients_with_per_client_ef_state():
  """Engine-like use: gather states of arriving ids, vmap compress, scatter back."""
  n_clients, k = 5, 3
  rng = np.random.default_rng(0)
  params = {'b': jnp.zeros(4, jnp.float32), 'w': jnp.zeros((2, 3), jnp.float32)}
  c = compression.error_feedback(compression.top_k(k=k))
  states = jax.vmap(lambda _: c.init(params))(jnp.arange(n_clients))

  @jax.jit
  @chex.assert_max_traces(n=1)
  def step(states, ids, deltas, keys):
    mine = jax.tree.map(lambda s: s[ids], states)
    sent, new, bits = jax.vmap(c.compress)(deltas, mine, keys)
    return sent, jax.tree.map(lambda s, n: s.at[ids].set(n), states, new), bits

  e_ref = np.zeros((n_clients, 10), np.float32)
  for ids in ([0, 2, 4], [1, 2, 3], [4, 0, 1], [2, 3, 4]):
    deltas = {
      'b': rng.standard_normal((3, 4)).astype(np.float32),
      'w': rng.standard_normal((3, 2, 3)).astype(np.float32),
    }
    keys = jax.random.split(jax.random.key(len(ids)), 3)
    sent, states, bits = step(states, jnp.array(ids), deltas, keys)
    np.testing.assert_array_equal(np.asarray(bits), [k * (32 + 4)] * 3)
    for j, i in enumerate(ids):
      corrected = np.concatenate([deltas['b'][j], deltas['w'][j].ravel()]) + e_ref[i]
      ref = np_top_k(corrected, k)
      e_ref[i] = corrected - ref
      got = np.concatenate([np.asarray(sent['b'][j]), np.asarray(sent['w'][j]).ravel()])
      np.testing.assert_allclose(got, ref, rtol=1e-6)
  got_e = np.concatenate(
    [np.asarray(states.residual['b']), np.asarray(states.residual['w']).reshape(n_clients, 6)], 1
  )
  np.testing.assert_allclose(got_e, e_ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
  'name,kwargs', [('qsgd', {'bits': 3}), ('top_k_qsgd', {'k': 4, 'bits': 3})]
)
def test_vmap_stochastic_per_client_keys(name, kwargs):
  c = getattr(compression, name)(**kwargs)
  xs = jnp.asarray(np.random.default_rng(1).standard_normal((4, 12)), jnp.float32)
  keys = jax.random.split(jax.random.key(3), 4)
  batched, _, _ = jax.jit(jax.vmap(c.compress, in_axes=(0, None, 0)))(xs, c.init(xs[0]), keys)
  for i in range(4):
    single, _, _ = jax.jit(c.compress)(xs[i], c.init(xs[i]), keys[i])
    np.testing.assert_allclose(np.asarray(batched[i]), np.asarray(single), rtol=1e-6)
    x = np.asarray(xs[i], np.float64)
    kept = np.abs(x) >= np.sort(np.abs(x))[-4] if name == 'top_k_qsgd' else np.ones(12, bool)
    norm = np.linalg.norm(x[kept])
    level = np.abs(np.asarray(batched[i], np.float64)) * 3 / norm
    np.testing.assert_allclose(level, np.round(level), atol=1e-4)
  # Same data, different keys -> different draws.
  same = jnp.broadcast_to(xs[0], xs.shape)
  out, _, _ = jax.jit(jax.vmap(c.compress, in_axes=(0, None, 0)))(same, c.init(xs[0]), keys)
  assert len({np.asarray(o).tobytes() for o in out}) > 1
