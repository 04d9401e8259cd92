"""config.compressor wraps any algorithm's messages (FedBuff + Top-k against NumPy; every algorithm
with every kind; the asynflc presets refuse a second one); one bit-counting convention."""

import algorithm_cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic, np_local_gd, quadratic_problem

import afl_jax
from afl_jax import compression
from afl_jax.errors import ConfigError
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline.build import algorithm_factory, build_algorithm

N, D = 4, 4
KINDS = ('identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd')
PRESETS = ('asynflc', 'asynflc_ef')
INFO = algorithm_cases.run_info(N, num_rounds=8)
HPARAMS = {
  'client_lr': 0.05,
  'window_size': 2,
  'server_lr': 0.5,
  'distill_steps': 1,
  'distill_lr': 0.01,
}


def _config(name, kind, **compressor):
  c = config_lib.default()
  hp = {k: v for k, v in HPARAMS.items() if k in afl_jax.algorithms.settings(name)}
  config_lib.set_algorithm(c, name, **hp)
  c.compressor.kind = kind
  c.compressor.fraction = 0.5
  for k, v in compressor.items():
    c.compressor[k] = v
  return c


def _schedule():
  return afl_jax.schedules.from_arrays([[0, 1], [2, 3]], [[0, 0], [0, 0]], local_steps=2)


def _run(algorithm):
  a, b = make_quadratic(num_clients=N, dim=D)
  return afl_jax.simulate(
    algorithm, quadratic_problem(a, b), _schedule(), {'x': jnp.ones(D)}, jax.random.key(0)
  )


def test_fedbuff_top_k_server_receives_the_compressed_messages():
  lr, server_lr = 0.1, 0.5
  c = _config('fedbuff', 'top_k')
  c.hparams.client_lr, c.hparams.server_lr = lr, server_lr
  alg = build_algorithm(c, INFO)
  sched = afl_jax.schedules.from_arrays([[0, 1]], [[0, 0]], local_steps=3, num_clients=N)
  a, b = make_quadratic(num_clients=N, dim=D)
  res = afl_jax.simulate(alg, quadratic_problem(a, b), sched, {'x': jnp.ones(D)}, jax.random.key(0))
  x0 = np.ones(D)
  kept = []
  for i in (0, 1):
    delta = x0 - np_local_gd(a[i], b[i], x0, lr, 3)  # the pseudo-gradient message
    keep = np.argsort(-np.abs(delta), kind='stable')[: D // 2]  # k = ceil(0.5 * 4) = 2
    top = np.zeros(D)
    top[keep] = delta[keep]
    kept.append(top)
  expected = x0 - server_lr * np.mean(kept, axis=0)
  np.testing.assert_allclose(np.asarray(res.params_history['x'][0]), expected, rtol=1e-5)
  # Two messages of k = 2 values (32 bits) and 2 indices (ceil(log2 4) = 2 bits).
  assert float(res.metrics['bits_up'][0]) == 2 * compression.top_k_bits(D, 2) == 136


def test_error_feedback_from_the_config_wraps_the_compressor():
  alg = build_algorithm(_config('fedfa_delta', 'top_k', error_feedback=True), INFO)
  state = alg.compressor.init({'x': jnp.zeros(D)})
  assert isinstance(state, compression.ErrorFeedbackState)


@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_every_algorithm_accepts_every_compressor(name):
  for kind in KINDS:
    c = _config(name, kind)
    if name in PRESETS:
      with pytest.raises(
        ConfigError, match=r"config.compressor.kind='.*' is invalid: .*already compresses"
      ):
        build_algorithm(c, INFO)
      with pytest.raises(
        ConfigError, match='already compresses'
      ):  # a sweep builds through the factory
        algorithm_factory(c, INFO)(**dict(c.hparams))
      continue
    alg = build_algorithm(c, INFO)
    assert alg.compressor is not None
  kind = KINDS[afl_jax.algorithms.names().index(name) % len(KINDS)]
  alg = build_algorithm(_config(name, 'none' if name in PRESETS else kind), INFO)
  res = _run(alg)
  assert np.all(np.isfinite(np.asarray(res.params_history['x'])))
  assert np.all(np.asarray(res.metrics['bits_up']) > 0)


def test_one_bit_convention_uncompressed_equals_identity():
  plain = _run(build_algorithm(_config('fedbuff', 'none'), INFO))
  ident = _run(build_algorithm(_config('fedbuff', 'identity'), INFO))
  np.testing.assert_array_equal(plain.metrics['bits_up'], ident.metrics['bits_up'])
  assert float(plain.metrics['bits_up'][0]) == 2 * compression.identity_bits(D)
