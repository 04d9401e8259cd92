"""Shared test setup: the number of CPU devices the tests run on.

``AFL_JAX_TEST_DEVICES`` (default 1) sets ``--xla_force_host_platform_device_count``
before JAX is imported; .ci/run runs the device tests a second time with 2. Subprocess
tests (tests/sharding_test.py) force their own device counts whatever this is.
"""

import os
import re
import tempfile

import pytest

_DEVICES = os.environ.get('AFL_JAX_TEST_DEVICES', '1')
if not _DEVICES.isdigit() or int(_DEVICES) < 1:
  raise ValueError(f'AFL_JAX_TEST_DEVICES must be an integer >= 1; got {_DEVICES!r}.')
_flags = re.sub(r'--xla_force_host_platform_device_count=\S+', '', os.environ.get('XLA_FLAGS', ''))
os.environ['XLA_FLAGS'] = f'{_flags} --xla_force_host_platform_device_count={_DEVICES}'.strip()
os.environ.setdefault('AFL_JAX_CPU_DEVICES', _DEVICES)  # for scripts that still read it

# Many tests (and the scripts/train.py subprocesses they start) compile the same small
# programs; JAX's persistent compilation cache shares them across processes. A cached
# executable is the same program, so results are unchanged; opt out by setting
# JAX_COMPILATION_CACHE_DIR='' yourself.
os.environ.setdefault(
  'JAX_COMPILATION_CACHE_DIR',
  os.path.join(tempfile.gettempdir(), f'afl_jax_test_cache_{os.getuid()}'),
)
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')


@pytest.fixture
def x64():
  """The test runs with 64-bit JAX types, scoped to it: no other test inherits them."""
  import jax  # after XLA_FLAGS above

  with jax.enable_x64(True):
    yield


@pytest.fixture
def quad():
  """A 3-client quadratic problem, a 4-arrival schedule and zero params (API argument checks)."""
  import jax.numpy as jnp
  from quadratic import make_quadratic, quadratic_problem

  import afl_jax

  a, b = make_quadratic(num_clients=3, dim=4)
  problem = quadratic_problem(a, b)
  schedule = afl_jax.schedules.from_arrays([0, 1, 2, 0], [0, 0, 1, 2], local_steps=2)
  return problem, schedule, {'x': jnp.zeros(4)}
