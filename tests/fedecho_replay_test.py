"""FedEcho (Wang, Ma, Chen, Alg. 1) through the engine: a stale, out-of-order schedule replayed
against a NumPy loop on a linear-softmax problem."""

import jax
import jax.numpy as jnp
import numpy as np
from fedecho_rules_test import np_softmax
from quadratic import arrivals_at
from same import assert_close_ulps

import afl_jax
from afl_jax.algorithms._fedecho import held_checkpoints

N, D, C = 5, 3, 3  # client 4 never reports
# Out of order: at step 1 the job that started later (client 2, from 1) sits before the
# older one (client 0, from 0); step 2 has a padded slot with the canonical id 0.
IDS = [[1, 3], [2, 0], [3, 0], [1, 2], [0, 3], [2, 1]]
START = [[0, 0], [1, 0], [1, 0], [1, 2], [2, 3], [4, 4]]
STEPS = [[2, 1], [1, 3], [2, 1], [3, 2], [1, 2], [2, 1]]
MASK = [[1, 1], [1, 1], [1, 0], [1, 1], [1, 1], [1, 1]]
ETA_L, ETA_G, ETA_D, NU, Q = 0.4, 0.8, 0.5, 0.3, 2


def _schedule():
  return afl_jax.schedules.from_arrays(IDS, START, local_steps=STEPS, mask=MASK, num_clients=N)


def _data(dtype):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(N, 6, D)).astype(dtype)
  y = rng.integers(0, C, size=(N, 6)).astype(np.int32)
  u = (rng.normal(size=(7, D)) * 2.0).astype(dtype)
  w0 = (rng.normal(size=(D, C)) * 0.3).astype(dtype)
  return x, y, u, {'w': w0, 'b': np.zeros(C, dtype)}


def apply_fn(params, x):
  return x @ params['w'] + params['b']


def loss_fn(params, batch):
  logp = jax.nn.log_softmax(apply_fn(params, batch['x']))
  return -jnp.mean(jnp.take_along_axis(logp, batch['y'][:, None], axis=1))


def np_local(x, y, p, k):
  """K steps of full-batch GD on the mean cross-entropy of a linear-softmax model."""
  w, b = p['w'].astype(np.float64), p['b'].astype(np.float64)
  for _ in range(k):
    r = (np_softmax(x @ w + b) - np.eye(C)[y]) / len(y)
    w, b = w - ETA_L * x.T @ r, b - ETA_L * r.sum(0)
  return {'w': w, 'b': b}


def np_fedecho(sched, x, y, u, p0, q):
  """Alg. 1 with teacher = mean stored logits, dynamic alpha in [0.2, 0.8], clipped SGD."""
  hist, stored = [p0], np.zeros((N, len(u), C))
  reported, snapshots, clipped = np.zeros(N, bool), [], []
  for t in range(sched.num_steps):
    deltas = []
    for i, s, k in arrivals_at(sched, t):
      local = np_local(x[i], y[i], hist[s], k)  # line 5
      stored[i], reported[i] = u @ local['w'] + local['b'], True
      deltas.append({k: local[k] - hist[s][k] for k in local})
    p = {k: hist[t][k] + ETA_G * np.mean([d[k] for d in deltas], 0) for k in hist[t]}  # l. 11
    for _ in range(q):  # lines 12-16
      prob = np_softmax(stored[reported].mean(0))
      h = -np.sum(prob * np.log(prob), 1).mean() / np.log(C)
      alpha = h * 0.8 + (1 - h) * 0.2
      r = (
        np_softmax(u @ p['w'] + p['b']) - alpha * prob - (1 - alpha) * np.eye(C)[prob.argmax(1)]
      ) / len(u)
      g = {'w': u.T @ r, 'b': r.sum(0)}
      norm = np.sqrt(sum(np.sum(v**2) for v in g.values()))
      clipped.append(norm > NU)
      p = {k: p[k] - ETA_D * min(1.0, NU / norm) * g[k] for k in p}
    hist.append(p)
    snapshots.append(stored.copy())
  return hist[1:], snapshots, reported, np.array(clipped)


def _fedecho(u, q, optimizer='sgd'):
  hp = dict(client_lr=ETA_L, server_lr=ETA_G, distill_steps=q, distill_lr=ETA_D, clip_norm=NU)
  facts = dict(apply_fn=apply_fn, unlabeled_x=u, num_clients=N)
  return afl_jax.algorithms.make('fedecho', optimizer=optimizer, **hp, **facts)


def test_q0_is_fedbuff_exactly():
  x, y, u, p0 = _data(np.float32)
  sched, problem = _schedule(), afl_jax.problems.from_loss(loss_fn, {'x': x, 'y': y})
  params0 = jax.tree.map(jnp.asarray, p0)
  echo = afl_jax.simulate(_fedecho(u, 0), problem, sched, params0, jax.random.key(0))
  fedbuff = afl_jax.algorithms.make('fedbuff', client_lr=ETA_L, server_lr=ETA_G)
  buff = afl_jax.simulate(fedbuff, problem, sched, params0, jax.random.key(0))
  for k in ('w', 'b'):
    # q = 0 zeroes the echo term, but FedEcho is another program: 4 ulps per server step.
    assert_close_ulps(echo.params_history[k], buff.params_history[k], ulps=4 * sched.num_steps)
  expected, _, _, _ = np_fedecho(sched, x, y, u, p0, q=0)
  for t, p in enumerate(expected):
    np.testing.assert_allclose(echo.params_history['w'][t], p['w'], atol=2e-6)


def test_replay_matches_numpy_and_logits_belong_to_their_clients(x64):
  x, y, u, p0 = _data(np.float64)
  sched, problem = _schedule(), afl_jax.problems.from_loss(loss_fn, {'x': x, 'y': y})
  sim = afl_jax.Simulator(_fedecho(u, Q), problem, sched, chunk_size=3, record_params=True)
  key = jax.random.key(0)
  state = sim.init(jax.tree.map(jnp.asarray, p0), key)
  state, first = sim.run_chunk(state, key)
  mid_logits = np.array(state.server.logits, copy=True)
  mid_reported = np.array(state.server.reported, copy=True)
  state, second = sim.run_chunk(state, key)
  hist, snaps, reported, clipped = np_fedecho(sched, x, y, u, p0, Q)
  assert clipped.any() and not clipped.all()  # both sides of the clip are exercised
  got_w = np.concatenate([first['params']['w'], second['params']['w']])
  got_b = np.concatenate([first['params']['b'], second['params']['b']])
  np.testing.assert_allclose(got_w, [p['w'] for p in hist], rtol=1e-9, atol=1e-11)
  np.testing.assert_allclose(got_b, [p['b'] for p in hist], rtol=1e-9, atol=1e-11)
  # After step 2: client 3's logits are from its second job (start 1), not its first;
  # client 0 keeps those of its stale job (start 0) despite the padded slot id 0.
  np.testing.assert_allclose(mid_logits, snaps[2], rtol=1e-10, atol=1e-12)
  np.testing.assert_array_equal(mid_reported, [True, True, True, True, False])
  np.testing.assert_allclose(state.server.logits, snaps[-1], rtol=1e-10, atol=1e-12)
  np.testing.assert_array_equal(state.server.reported, reported)
  assert not np.any(np.asarray(state.server.logits[4]))
  for c in range(4):  # each row differs from every other client's row
    others = [snaps[-1][o] for o in range(4) if o != c]
    assert all(np.abs(state.server.logits[c] - o).max() > 1e-3 for o in others)


def test_held_checkpoints_never_exceed_concurrency():
  s = _schedule()
  assert s.max_staleness == 2 and s.mask.sum() == 11
  np.testing.assert_array_equal(held_checkpoints(s), [0, 1, 1, 2, 2, 1])
  for mc, m, seed in ((6, 2, 0), (10, 3, 1)):
    sched = afl_jax.schedules.fedbuff(20, mc, m, 150, seed=seed)
    held = held_checkpoints(sched)
    assert held.max() <= mc and held.max() >= 2
    # The jobs with s < t <= t' were all training when step t - 1 fired: at most Mc.
    t_arr = np.broadcast_to(np.arange(sched.num_steps)[:, None], sched.mask.shape)
    jobs = list(zip(sched.start_step[sched.mask], t_arr[sched.mask], strict=True))
    for t in (1, 50, 149):
      assert sum(1 for s, end in jobs if s < t <= end) <= mc
