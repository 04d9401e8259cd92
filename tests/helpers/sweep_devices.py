"""With 4 forced CPU devices: 2 replicas on a 2-device mesh (replicas sharded) for every
algorithm, and on 4 devices (each replica's clients sharded) for a few; prints one JSON line
``{case: [params history [R][T][4], final params [R][4]]}`` for tests/sweep_test.py."""

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
