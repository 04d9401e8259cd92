"""Run with 2 forced CPU devices: FedBuff with arrivals grouped by K (2 blocks) vs padded.

Prints one JSON line {'diff': max_abs_difference, 'blocks': block size of the grouped run}.
"""

import json
import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=2'

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from algorithm_cases import build, run_info  # noqa: E402
from helpers.sim_runs import run  # noqa: E402
from quadratic import make_quadratic, quadratic_problem  # noqa: E402

import afl_jax  # noqa: E402

jax.config.update('jax_enable_x64', True)
assert jax.device_count() == 2
a, b = make_quadratic(num_clients=8, dtype=np.float64)
sched = afl_jax.schedules.random_staleness(
  8, 4, 6, window=3, local_steps=1, local_steps_multipliers=range(1, 5), seed=2
)
alg = build('fedbuff', run_info(8))
out = {
  buckets: run(alg, quadratic_problem(a, b), sched, {'x': jnp.ones(4)}, local_step_buckets=buckets)
  for buckets in (0, 2)
}
diff = np.abs(out[0][0]['params']['x'] - out[2][0]['params']['x']).max()
print(json.dumps({'diff': float(diff), 'blocks': out[2][2].block_size}))
