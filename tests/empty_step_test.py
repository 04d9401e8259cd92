"""A server step at which no client reports leaves the global model where it is: no momentum,
adaptive moments or cached updates move it (every registered algorithm, through ``simulate``)."""

import algorithm_cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic, quadratic_problem

import afl_jax

NUM_CLIENTS = 4


def _schedule_with_empty_step():  # steps 0, 1 build momentum and caches; step 2 is empty
  ids, start = [[0, 1], [2, 3], [0, 0], [0, 1]], [[0, 0], [0, 0], [0, 0], [1, 1]]
  mask = [[True, True], [True, True], [False, False], [True, True]]
  return afl_jax.schedules.from_arrays(ids, start, local_steps=2, mask=mask)


@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_no_arrival_leaves_model_unchanged(name):
  alg = algorithm_cases.build(name, algorithm_cases.run_info(NUM_CLIENTS))
  problem = quadratic_problem(*make_quadratic(num_clients=NUM_CLIENTS))
  res = afl_jax.simulate(
    alg, problem, _schedule_with_empty_step(), {'x': jnp.ones(4)}, jax.random.key(0)
  )
  x = np.asarray(res.params_history['x'])
  assert np.all(np.isfinite(x))
  assert not np.array_equal(x[1], x[0])  # the model moves at the steps with arrivals
  assert not np.array_equal(x[3], x[2])
  np.testing.assert_array_equal(x[2], x[1])
