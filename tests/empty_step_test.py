"""A server step at which no client reports leaves the global model where it is.

Waiting-window schedules (AsynFL) and imported device traces can have steps with no
valid arrival. No rule may move the model there: not by momentum (FedAvgM, FedGM,
MasFL), not by an adaptive optimizer's moments (FedAdam, FADAS), not by cached
updates (CA2FL). Checked for every registered algorithm through the public
``simulate`` entry point.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic, quadratic_problem

import afl_jax

NUM_CLIENTS = 4
UNLABELED = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)


def _two_class_logits(params, x):
  z = x @ params['x']
  return jnp.stack([z, -z], axis=-1)


EXTRA = {
  'asynfl': dict(num_clients=NUM_CLIENTS),
  'asynflc': dict(num_clients=NUM_CLIENTS, fraction=0.5),
  'asynflc_ef': dict(num_clients=NUM_CLIENTS, fraction=0.5),
  'masfl': dict(client_lr=0.05, server_lr=1.0, beta=0.5),
  'adamasfl': dict(client_lr=0.05, server_lr=0.1, beta=0.5),
  'fedecho': dict(
    apply_fn=_two_class_logits,
    unlabeled_x=UNLABELED,
    num_clients=NUM_CLIENTS,
    distill_steps=2,
    distill_lr=0.01,
  ),
  'fadas': dict(server_lr=0.05),
}
WINDOW = dict(window_size=2)  # FedFa: past the warm-up before the empty step


def _schedule_with_empty_step():
  # Steps 0 and 1 build up server momentum / moments / caches; step 2 is empty;
  # step 3 brings stale arrivals again.
  ids = [[0, 1], [2, 3], [0, 0], [0, 1]]
  start = [[0, 0], [0, 0], [0, 0], [1, 1]]
  mask = [[True, True], [True, True], [False, False], [True, True]]
  return afl_jax.schedules.from_arrays(ids, start, local_steps=2, mask=mask)


@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_no_arrival_leaves_model_unchanged(name):
  hparams = {'client_lr': 0.05, **WINDOW, **EXTRA.get(name, {})}
  hparams = {k: v for k, v in hparams.items() if k in afl_jax.algorithms.hyperparameters(name)}
  alg = afl_jax.algorithms.get(name, **hparams)
  a, b = make_quadratic(num_clients=NUM_CLIENTS)
  res = afl_jax.simulate(
    alg, quadratic_problem(a, b), _schedule_with_empty_step(), {'x': jnp.ones(4)}, jax.random.key(0)
  )
  x = np.asarray(res.params_history['x'])
  assert np.all(np.isfinite(x))
  assert not np.array_equal(x[1], x[0])  # the model moves at the steps with arrivals
  assert not np.array_equal(x[3], x[2])
  np.testing.assert_array_equal(x[2], x[1])
