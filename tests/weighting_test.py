"""Example-count weighting (FedAvg, McMahan et al. 2017, Alg. 1: ``sum_k (n_k / n) w^k``) and
ragged clients of 2, 5 and 9 rows (padding never enters a loss)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import fresh_schedule, hand_arrivals

import afl_jax
from afl_jax.algorithms import _shared as weighting

SIZES = (2, 5, 9)
DIM, LR, K, T = 3, 0.2, 3, 4


def _clients(seed=0):
  rng = np.random.default_rng(seed)
  return [{'a': rng.normal(size=(n, DIM)), 'b': rng.normal(size=n)} for n in SIZES]


def mse(params, batch):
  r = batch['a'] @ params['x'] - batch['b']
  return 0.5 * jnp.mean(r * r)


def np_local_gd(a, b, x, lr, k):
  """K steps of gradient descent on 0.5 * mean((A x - b)^2) over the client's own rows."""
  for _ in range(k):
    x = x - lr * a.T @ (a @ x - b) / len(b)
  return x


@pytest.mark.parametrize('weighting_name', ['examples', 'uniform'])
def test_fedavg_weights_clients_by_examples_on_unequal_clients(weighting_name, x64):
  clients = _clients()
  problem = afl_jax.problems.from_loss(mse, clients)
  np.testing.assert_array_equal(problem.client_sizes, SIZES)
  x0 = np.array([0.5, -1.0, 0.25])
  hp = {} if weighting_name == 'examples' else dict(weighting=weighting_name)  # the default
  alg = afl_jax.algorithms.make('fedavg', client_lr=LR, **hp)
  res = afl_jax.simulate(
    alg, problem, fresh_schedule(len(SIZES), T, K), {'x': jnp.asarray(x0)}, jax.random.key(0)
  )
  p = np.array(SIZES, float) / sum(SIZES) if weighting_name == 'examples' else np.ones(3) / 3
  x, want = x0.copy(), []
  for _ in range(T):
    x = sum(p[i] * np_local_gd(c['a'], c['b'], x, LR, K) for i, c in enumerate(clients))
    want.append(x)
  np.testing.assert_allclose(res.params_history['x'], np.stack(want), rtol=1e-12, atol=1e-13)


def test_fedavg_without_example_counts_is_refused():
  alg = afl_jax.algorithms.make('fedavg', client_lr=0.1)  # the counts travel with the messages
  arrivals = hand_arrivals([0, 1], [True, True])
  state = alg.server.init({'x': jnp.zeros(2)})
  with pytest.raises(ValueError, match='num_examples'):
    alg.server.update(state, {'x': jnp.ones((2, 2))}, arrivals, jax.random.key(0))


def test_row_weights_ignore_padding_and_non_reporting_rows():
  # Slots 2 and 3 are padding (client id 0, as the engine pads); slot 1 does not report.
  arrivals = hand_arrivals([2, 1, 0, 0], [True, True, False, False])
  arrivals = arrivals._replace(
    num_examples=jnp.asarray(SIZES)[arrivals.client_ids], total_examples=jnp.asarray(sum(SIZES))
  )
  np.testing.assert_allclose(weighting.row_weights(arrivals, examples=True), [9 / 14, 5 / 14, 0, 0])
  np.testing.assert_allclose(
    weighting.row_weights(arrivals, 'clients', examples=True), [9 / 16, 5 / 16, 0, 0]
  )
  np.testing.assert_allclose(weighting.row_weights(arrivals), [0.5, 0.5, 0, 0])
  np.testing.assert_allclose(weighting.row_weights(arrivals, 'clients', 3), [1 / 3, 1 / 3, 0, 0])


def test_fednova_examples_matches_numpy_with_unequal_steps(x64):
  """Wang et al. 2020: x <- x - tau_eff sum_i p_i Delta_i / tau_i, tau_eff = sum_i p_i tau_i."""
  clients = _clients(1)
  problem = afl_jax.problems.from_loss(mse, clients)
  steps = [1, 2, 4]
  sched = afl_jax.schedules.from_arrays(
    [[0, 1, 2]] * 2, [[0] * 3, [1] * 3], local_steps=[steps] * 2
  )
  x0 = np.array([0.5, -1.0, 0.25])
  alg = afl_jax.algorithms.make('fednova', client_lr=LR)
  res = afl_jax.simulate(alg, problem, sched, {'x': jnp.asarray(x0)}, jax.random.key(0))
  p = np.array(SIZES, float) / sum(SIZES)
  tau_eff = float(p @ steps)
  x, want = x0.copy(), []
  for _ in range(2):
    d = [
      (x - np_local_gd(c['a'], c['b'], x, LR, steps[i])) / steps[i] for i, c in enumerate(clients)
    ]
    x = x - tau_eff * sum(p[i] * d[i] for i in range(3))
    want.append(x)
  np.testing.assert_allclose(res.params_history['x'], np.stack(want), rtol=1e-12, atol=1e-13)


def test_ragged_full_batch_loss_uses_valid_rows_only(x64):
  clients = _clients()
  for reduction, red in (('mean', np.mean), ('sum', np.sum)):
    problem = afl_jax.problems.from_loss(mse, clients, reduction=reduction)
    x = np.array([0.3, 0.1, -0.2])
    for i, c in enumerate(clients):
      view = jax.tree.map(lambda v, i=i: v[i], problem.client_views)
      batch = problem.sample_fn(problem.shared, view, jax.random.key(0))
      got = problem.loss_fn({'x': jnp.asarray(x)}, batch)
      per_row = 0.5 * (c['a'] @ x - c['b']) ** 2
      np.testing.assert_allclose(got, red(per_row), rtol=1e-13)


def test_ragged_minibatches_sample_valid_rows_only():
  clients = [{'id': np.arange(n, dtype=np.float32) + 1.0} for n in SIZES]  # padding rows are 0
  problem = afl_jax.problems.from_loss(
    lambda p, b: jnp.sum(b['id']), clients, full_batch=False, batch_size=64
  )
  for i, n in enumerate(SIZES):
    view = jax.tree.map(lambda v, i=i: v[i], problem.client_views)
    seen = set()
    for s in range(4):
      batch = problem.sample_fn(problem.shared, view, jax.random.key(s))
      seen |= set(np.asarray(batch['id']).tolist())
    assert seen == set(range(1, n + 1)), (i, seen)
