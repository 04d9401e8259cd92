"""A tiny deterministic federated problem and plain-NumPy reference loops for tests.

Client i has f_i(x) = 0.5 * ||A_i x - b_i||^2 (full batch; the library's
``afl_jax.problems.quadratic``), so local gradient descent is
``x <- x - lr * A_i^T (A_i x - b_i)``. The references below are written from the
papers' equations, independently of the library. :func:`logistic_problem` is a
mini-batched one for the tests where the batches' randomness matters; :func:`conv_problem`
one whose model convolves and pools (trained through ``models.fast_apply``).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import afl_jax
from afl_jax import models
from afl_jax.core.types import LocalTask
from afl_jax.problems import quadratic_loss

# A stale schedule of 3 clients: 6 steps, 2 slots, staleness up to 3 (tau_max per step:
# 0, 1, 2, 3, 3, 3), one padded arrival (step 2, slot 1), K in {1, 2, 3}. Client 0 has
# two jobs in flight twice: the job arriving at t=1 started at s=0 before its job of t=0
# arrived, and the job arriving at t=5 started at s=2, before its job of t=3 started.
STALE_IDS = [[0, 1], [2, 0], [1, 0], [0, 2], [2, 1], [1, 0]]
STALE_START = [[0, 0], [1, 0], [0, 2], [3, 0], [1, 4], [5, 2]]
STALE_STEPS = [[2, 1], [3, 2], [1, 3], [2, 2], [1, 3], [2, 1]]
STALE_MASK = [[1, 1], [1, 1], [1, 0], [1, 1], [1, 1], [1, 1]]


def make_quadratic(num_clients=3, dim=4, rows=5, seed=0, dtype=np.float32):
  rng = np.random.default_rng(seed)
  a = rng.normal(size=(num_clients, rows, dim)) / np.sqrt(rows)
  b = rng.normal(size=(num_clients, rows))
  return a.astype(dtype), b.astype(dtype)


def quadratic_problem(a, b):
  return afl_jax.problems.quadratic(a, b).problem


def logistic_loss(params, batch):
  logits = batch['x'] @ params['w'] + params['b']
  return jnp.mean(jnp.logaddexp(0.0, logits) - batch['y'] * logits)


def logistic_problem(num_clients, rows, dim, seed=0):
  """Client i holds ``rows`` Gaussian points of R^dim, labelled by one random hyperplane.

  The loss is logistic in ``{'w': [dim], 'b': []}``, on mini-batches of 4.
  """
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_clients, rows, dim)).astype(np.float32)
  y = (x @ rng.normal(size=dim) > 0).astype(np.int32)
  return afl_jax.problems.from_loss(logistic_loss, {'x': x, 'y': y}, full_batch=False, batch_size=4)


class TinyCNN(nn.Module):
  """A 3x3 convolution of 2 features, ReLU, 2x2 max-pooling and a dense layer of 3 logits."""

  @nn.compact
  def __call__(self, x):
    x = nn.max_pool(nn.relu(nn.Conv(2, (3, 3))(x)), (2, 2), (2, 2))
    return nn.Dense(3)(x.reshape(x.shape[0], -1))


def conv_problem(num_clients, rows, seed=0):
  """Client i holds ``rows`` random 6x6x1 images of 3 classes; :class:`TinyCNN`'s cross-entropy
  (through ``models.fast_apply``) on mini-batches of 4. Returns ``(problem, params0)``."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_clients, rows, 6, 6, 1))
  y = rng.integers(0, 3, size=(num_clients, rows))
  model = TinyCNN()
  apply = models.fast_apply(model.apply)

  def loss(params, batch):
    logits = apply(params, batch['x'])
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), batch['y'][:, None], 1))

  problem = afl_jax.problems.from_loss(loss, {'x': x, 'y': y}, full_batch=False, batch_size=4)
  return problem, model.init(jax.random.key(seed), jnp.asarray(x[0]))


def stale_schedule(local_steps=STALE_STEPS):
  """The stale schedule above; ``local_steps`` replaces its K's."""
  return afl_jax.schedules.from_arrays(
    STALE_IDS, STALE_START, local_steps=local_steps, mask=STALE_MASK
  )


def stale_setup(seed=0):
  """``(a, b, x0, schedule)``: the float64 quadratic, x0 = linspace(-1, 1, 4), stale_schedule()."""
  a, b = make_quadratic(seed=seed, dtype=np.float64)
  return a, b, np.linspace(-1, 1, 4), stale_schedule()


def fresh_schedule(num_clients, num_steps, local_steps):
  """Every client arrives at every step, started from the latest model (no staleness)."""
  ids = np.tile(np.arange(num_clients), (num_steps, 1))
  start = np.tile(np.arange(num_steps)[:, None], (1, num_clients))
  return afl_jax.schedules.from_arrays(ids, start, local_steps=local_steps)


def simulate_quadratic(alg, a, b, x0, schedule, /, **hp):
  """``afl_jax.simulate`` on the quadratic (a, b) from ``{'x': x0}`` with key 0.

  ``alg`` is an algorithm, or a registry name that ``hp`` configures.
  """
  if isinstance(alg, str):
    alg = afl_jax.algorithms.make(alg, **hp)
  elif hp:
    raise TypeError(f'hyperparameters {sorted(hp)} given with a built algorithm')
  return afl_jax.simulate(
    alg, quadratic_problem(a, b), schedule, {'x': jnp.asarray(x0)}, jax.random.key(0)
  )


def hand_arrivals(ids, mask, *, staleness=0, num_steps=1, start_broadcast=None, step=0):
  """One server step's :class:`afl_jax.Arrivals` written by hand, for calling a rule directly.

  Ids, staleness, K and t are int32; ``staleness`` and ``num_steps`` are one value per
  row, or one value for every row.
  """
  rows = lambda v: (
    jnp.full(len(ids), v, jnp.int32) if np.ndim(v) == 0 else jnp.asarray(v, jnp.int32)
  )
  return afl_jax.Arrivals(
    jnp.asarray(ids, jnp.int32),
    rows(staleness),
    jnp.asarray(mask, bool),
    rows(num_steps),
    start_broadcast,
    jnp.int32(step),
  )


def quadratic_task(a_i, b_i, num_steps, max_steps, *, client_id=0, active=True):
  """Client ``client_id``'s :class:`~afl_jax.core.types.LocalTask` on its full batch (a_i, b_i).

  For calling a client rule directly; ``num_steps`` of the scan's ``max_steps`` are run.
  """
  return LocalTask(
    view={'a': jnp.asarray(a_i), 'b': jnp.asarray(b_i)},
    shared=None,
    num_steps=jnp.asarray(num_steps, jnp.int32),
    active=jnp.asarray(active),
    client_id=jnp.asarray(client_id, jnp.int32),
    loss_fn=quadratic_loss,
    sample_fn=lambda shared, view, key: view,
    max_steps=max_steps,
  )


def np_grad(a_i, b_i, x):
  """The gradient A^T (A x - b) of 0.5||A x - b||^2."""
  return a_i.T @ (a_i @ x - b_i)


def np_local_gd(a_i, b_i, x0, lr, k, mu=0.0):
  """K steps of full-batch gradient descent on 0.5||A x - b||^2 (+ mu/2 ||x - x0||^2, FedProx)."""
  x = x0 = np.array(x0, dtype=np.float64)
  for _ in range(k):
    x = x - lr * (a_i.T.astype(np.float64) @ (a_i.astype(np.float64) @ x - b_i) + mu * (x - x0))
  return x


def arrivals_at(schedule, t):
  """``(client, start step, local steps)`` of step t's valid arrivals, in slot order."""
  m = np.asarray(schedule.mask[t], bool)
  rows = (
    np.asarray(q[t])[m] for q in (schedule.client_ids, schedule.start_step, schedule.local_steps)
  )
  return [tuple(int(v) for v in row) for row in zip(*rows)]


def np_replay(schedule, a, b, x0, lr, server_step, with_ids=False):
  """Replay ``schedule``: history[s] is the broadcast before step s (history[0] = x0).

  ``server_step(x_t, locals, starts, taus)`` returns x_{t+1} from the valid arrivals'
  local models, their start models and staleness (and, with ``with_ids=True``, their
  client ids as a fifth argument). ``a[i]``, ``b[i]`` may have each client's own rows.
  """
  history = [np.array(x0, np.float64)]
  for t in range(schedule.num_steps):
    locals_, starts, taus, ids = [], [], [], []
    for i, s, k in arrivals_at(schedule, t):
      starts.append(history[s])
      locals_.append(np_local_gd(a[i], b[i], history[s], lr, k))
      taus.append(t - s)
      ids.append(i)
    args = (history[t], locals_, starts, taus) + ((ids,) if with_ids else ())
    history.append(server_step(*args))
  return np.stack(history[1:])


def np_fedbuff_step(eta_g):
  """A ``server_step`` for :func:`np_replay`: FedBuff's ``x + eta_g * mean(x_local - x_start)``."""

  def step(x, locals_, starts, taus):
    del taus
    return x + eta_g * np.mean([xl - xs for xl, xs in zip(locals_, starts)], axis=0)

  return step


def check_fresh_is_fedbuff(name, num_steps, **hp):
  """On fresh full participation ``name`` is FedBuff: ``x <- x + eta mean_i(x_i - x)``.

  4 clients, K = 3, client_lr 0.2 and server_lr 0.7 (``hp`` adds to them), from x = 0:
  against that NumPy loop at every step, and against the library's FedBuff.
  """
  a, b = make_quadratic(num_clients=4, dtype=np.float64)
  sched = fresh_schedule(4, num_steps, local_steps=3)
  run = lambda alg, **kw: simulate_quadratic(
    alg, a, b, np.zeros(4), sched, client_lr=0.2, server_lr=0.7, **kw
  ).params_history['x']
  got, buff = run(name, **hp), run('fedbuff')
  x = np.zeros(4)
  for t in range(num_steps):
    x = x + 0.7 * np.mean([np_local_gd(a[i], b[i], x, 0.2, 3) - x for i in range(4)], 0)
    np.testing.assert_allclose(got[t], x, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(got, buff, rtol=1e-12, atol=1e-12)


# Step 2 has no arrival; the others have stale starts.
EMPTY_IDS = [[0, 1], [2, 0], [0, 0], [1, 2], [0, 1]]
EMPTY_START = [[0, 0], [0, 1], [0, 0], [2, 1], [1, 4]]
EMPTY_MASK = [[1, 1], [1, 1], [0, 0], [1, 1], [1, 1]]


def check_empty_step_and_exact_zeros(name, oracle, **hp):
  """``name`` against ``oracle(schedule, a, b, x0, **hp)`` (x after each step), on a
  schedule whose step 2 is empty and a problem where no sample touches coordinate 3.

  The empty step moves nothing, and coordinate 3 (an update of exactly 0) never moves:
  no drift, no NaN.
  """
  a, b = make_quadratic(dtype=np.float64)
  a[:, :, 3] = 0.0
  x0 = np.linspace(-1, 1, 4)
  sched = afl_jax.schedules.from_arrays(EMPTY_IDS, EMPTY_START, local_steps=2, mask=EMPTY_MASK)
  got = np.asarray(simulate_quadratic(name, a, b, x0, sched, **hp).params_history['x'])
  np.testing.assert_allclose(got, oracle(sched, a, b, x0, **hp), rtol=1e-10, atol=1e-10)
  np.testing.assert_array_equal(got[2], got[1])
  np.testing.assert_array_equal(got[:, 3], x0[3])
  assert np.all(np.isfinite(got))
