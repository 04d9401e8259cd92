"""User errors once tracebacks, now one line: a platform JAX cannot start, a key or a count of
schedules or problems ``simulate`` and ``sweep`` cannot take."""

import pathlib

import jax
import jax.numpy as jnp
import pytest
from helper_runs import one_error_line, run_train

import afl_jax
from afl_jax.errors import ArgumentError
from afl_jax.pipeline import devices

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMOKE = str(ROOT / 'configs' / 'digits_smoke.py')


@pytest.mark.parametrize(
  'platform, fragment',
  [
    ('cuda', 'JAX found no backend for cuda here'),
    ('nosuchplatform', "Backend 'nosuchplatform' is not in the list of known backends"),
  ],
)
def test_a_platform_jax_cannot_start_is_one_line(tmp_path, platform, fragment):
  if platform == 'cuda' and any(d.platform == 'gpu' for d in jax.devices()):
    pytest.skip('this machine has a GPU')
  rc, out = run_train(tmp_path / 'w', f'--config={SMOKE}', timeout=120, JAX_PLATFORMS=platform)
  line = one_error_line(rc, out, f"$JAX_PLATFORMS='{platform}' is invalid", fragment)
  assert 'set JAX_PLATFORMS=cpu' in line
  assert not (tmp_path / 'w').exists()  # refused before anything is written


def test_platforms_are_not_probed_for_a_multi_process_run(monkeypatch):
  monkeypatch.setenv('JAX_PLATFORMS', 'nosuchplatform')
  # JAX's distributed runtime must start before any backend: left to it.
  assert devices.platform_error(['train.py', '--coordinator=h:1']) is None
  assert devices.platform_error(['train.py', '--num_processes=2']) is None
  monkeypatch.setenv('JAX_PLATFORMS', '')
  assert devices.platform_error(['train.py']) is None


@pytest.mark.parametrize(
  'key, match',
  [
    (0, r'^key must be one PRNG key; got int\. Pass jax\.random\.key\(seed\)\.$'),
    (jax.random.split(jax.random.key(0), 2), r'got 2 keys .*afl_jax\.sweep runs one per key'),
    (jax.random.split(jax.random.PRNGKey(0), 2), r'got uint32 of shape \(2, 2\)'),
    (jnp.zeros(2), r'got float32 of shape \(2,\)'),
  ],
)
def test_simulate_refuses_anything_but_one_key(quad, key, match):
  problem, schedule, params0 = quad
  alg = afl_jax.algorithms.make('fedbuff', client_lr=0.1)
  with pytest.raises(ArgumentError, match=match):
    afl_jax.simulate(alg, problem, schedule, params0, key)


def test_simulate_takes_a_typed_or_a_raw_key_alike(quad):
  problem, schedule, params0 = quad
  alg = afl_jax.algorithms.make('fedbuff', client_lr=0.1)
  typed = afl_jax.simulate(alg, problem, schedule, params0, jax.random.key(3))
  raw = afl_jax.simulate(alg, problem, schedule, params0, jax.random.PRNGKey(3))
  assert jnp.array_equal(typed.params_history['x'], raw.params_history['x'])


def test_sweep_refuses_an_int_and_a_count_other_than_its_keys(quad):
  problem, schedule, params0 = quad
  keys = jax.random.split(jax.random.key(0), 2)
  with pytest.raises(ArgumentError, match=r'^keys must be R PRNG keys, one per replica; got int'):
    afl_jax.sweep('fedbuff', problem, schedule, params0, 3, client_lr=0.1)
  with pytest.raises(ArgumentError, match=r'^got 3 schedules for 2 replicas \(keys\); give one'):
    afl_jax.sweep('fedbuff', problem, [schedule] * 3, params0, keys, client_lr=0.1)
  with pytest.raises(ArgumentError, match=r'^got 3 problems for 2 replicas \(keys\); give one'):
    afl_jax.sweep('fedbuff', [problem] * 3, schedule, params0, keys, client_lr=0.1)
  with pytest.raises(ValueError, match=r'client_lr must be a number or a sequence of 2 numbers'):
    afl_jax.sweep('fedbuff', problem, schedule, params0, keys, client_lr=[0.1, 0.2, 0.3])
