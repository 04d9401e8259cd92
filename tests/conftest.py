"""Shared test setup.

Tests run on one CPU device (the library would otherwise split the cores into one
device each, see afl_jax/__init__.py); tests/sharding_test.py runs 4 devices in a
subprocess to check that sharding changes nothing.
"""

import os

os.environ.setdefault('AFL_JAX_CPU_DEVICES', '1')
