"""Run with 4 forced CPU devices: sweeps on a multi-device mesh vs single-device runs.

* replicas sharded: 2 replicas on a 2-device mesh (each device runs one replica,
  no collective), for every registered algorithm;
* clients sharded: 2 replicas on a 4-device mesh (fewer replicas than devices, so
  every replica's clients are sharded as in a single run), for a few algorithms.

Prints one JSON line ``{case: [params history [R][T][4], final params [R][4]]}``;
tests/sweep_test.py compares them with the same runs alone on one device.
"""

import json
import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=4'

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_cases  # noqa: E402

import afl_jax  # noqa: E402

assert len(jax.devices()) == 4, jax.devices()
CLIENTS_CASES = ('fedbuff', 'asynflc_ef', 'masfl', 'fedecho')
jax.config.update('jax_enable_x64', True)
two = Mesh(np.array(jax.devices()[:2]), ('clients',))
four = Mesh(np.array(jax.devices()), ('clients',))
names = sys.argv[1:] or afl_jax.algorithms.names()
out = {}
for name in names:
  hist, final = sweep_cases.sweep_histories(name, mesh=two)
  out[f'{name}/replicas'] = [hist.tolist(), final.tolist()]
for name in [n for n in CLIENTS_CASES if n in names]:
  hist, final = sweep_cases.sweep_histories(name, mesh=four)
  out[f'{name}/clients'] = [hist.tolist(), final.tolist()]
print(json.dumps(out))
