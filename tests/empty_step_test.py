"""A server step at which no client reports leaves the global model where it is.

Waiting-window schedules (AsynFL) and imported device traces can have steps with no
valid arrival. No rule may move the model there: not by momentum (FedAvgM, FedGM,
MasFL), not by an adaptive optimizer's moments (FedAdam, FADAS), not by cached
updates (CA2FL). Checked for every registered algorithm through the public
``simulate`` entry point.
"""

import algorithm_cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic, quadratic_problem

import afl_jax

NUM_CLIENTS = 4


def _schedule_with_empty_step():
  # Steps 0 and 1 build up server momentum / moments / caches; step 2 is empty;
  # step 3 brings stale arrivals again.
  ids = [[0, 1], [2, 3], [0, 0], [0, 1]]
  start = [[0, 0], [0, 0], [0, 0], [1, 1]]
  mask = [[True, True], [True, True], [False, False], [True, True]]
  return afl_jax.schedules.from_arrays(ids, start, local_steps=2, mask=mask)


@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_no_arrival_leaves_model_unchanged(name):
  alg = algorithm_cases.build(name, algorithm_cases.run_info(NUM_CLIENTS))
  a, b = make_quadratic(num_clients=NUM_CLIENTS)
  res = afl_jax.simulate(
    alg, quadratic_problem(a, b), _schedule_with_empty_step(), {'x': jnp.ones(4)}, jax.random.key(0)
  )
  x = np.asarray(res.params_history['x'])
  assert np.all(np.isfinite(x))
  assert not np.array_equal(x[1], x[0])  # the model moves at the steps with arrivals
  assert not np.array_equal(x[3], x[2])
  np.testing.assert_array_equal(x[2], x[1])
