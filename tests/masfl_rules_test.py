"""MasFL / AdaMasFL rules called directly (under jax.jit) against Alg. 1-4 in NumPy.

Paper: Yan, Zhong, Wang, Zhang, "Momentum-Driven Adaptivity: Towards Tuning-Free
Asynchronous Federated Learning" (paper 000; docs/algorithms/masfl.md).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import hand_arrivals, make_quadratic, np_grad, quadratic_task

import afl_jax
from afl_jax.algorithms import _masfl as masfl_lib
from afl_jax.algorithms._masfl import adamasfl_theory, masfl_theory
from afl_jax.clients._masfl import (
  MasFLBroadcast,
  MasFLClientState,
  MasFLMessage,
  normalized,
)
from afl_jax.servers._masfl import init_state, uniform_selection


def _np_client_job(a_i, b_i, theta, direction, c_tilde, eta, beta, k, normalize):
  """Alg. 2 (MasFL) / Alg. 4 (AdaMasFL), lines 1-6, one client job."""
  x = theta.copy()
  grads = []
  for _ in range(k):
    gr = np_grad(a_i, b_i, x)
    grads.append(gr)
    g = beta * (gr - c_tilde) + direction  # d = beta c^{t-tau} + (1-beta) g^{t-tau}
    if normalize:
      n = np.linalg.norm(g)
      g = g / n if n > 0 else 0 * g
    x = x - eta * g
  return np.mean(grads, axis=0), (theta - x) / (eta * k)


@pytest.mark.parametrize('normalize', [False, True])
def test_one_client_job_matches_algorithm_2_and_4(normalize, x64):
  a, b = make_quadratic(dtype=np.float64)
  rng = np.random.default_rng(1)
  theta, direction, c_tilde = rng.normal(size=(3, 4))
  eta, beta, k = 0.3, 0.6, 3
  client = afl_jax.clients.masfl(eta, beta, normalize=normalize)
  # max_steps=5 > K=3: the masked steps must not change anything.
  msg, state, metrics = jax.jit(client.update)(
    MasFLBroadcast({'x': jnp.asarray(theta)}, {'x': jnp.asarray(direction)}),
    MasFLClientState({'x': jnp.asarray(c_tilde)[None]}, jnp.full((1,), -1, jnp.int32)),
    quadratic_task(a[1], b[1], k, 5, client_id=1),
    jax.random.key(0),
  )
  want_c, want_delta = _np_client_job(
    a[1], b[1], theta, direction, c_tilde, eta, beta, k, normalize
  )
  np.testing.assert_allclose(msg.variate['x'], want_c, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(state.variate['x'], want_c, rtol=1e-12, atol=1e-12)
  if normalize:
    np.testing.assert_allclose(msg.delta['x'], want_delta, rtol=1e-12, atol=1e-12)
    assert np.linalg.norm(msg.delta['x']) <= 1 + 1e-12  # mean of unit steps
  else:
    assert msg.delta is None
  assert np.isfinite(metrics['train_loss'])


def test_client_init_is_mean_of_k_gradients_at_theta0(x64):
  a, b = make_quadratic(dtype=np.float64)
  x0 = np.array([0.5, -1.0, 2.0, 0.0])
  client = afl_jax.clients.masfl(0.1, 0.5)
  state = jax.jit(client.init)(
    {'x': jnp.asarray(x0)}, quadratic_task(a[2], b[2], 3, 4, client_id=2), jax.random.key(3)
  )
  np.testing.assert_allclose(state.variate['x'], np_grad(a[2], b[2], x0), rtol=1e-12)


def _np_server_step(theta, c_i, c, g, arrivals, gamma, beta, adaptive):
  """Alg. 1 lines 4-8 / Alg. 3 lines 4-9 for S_t = the arrivals {i: (c~_i, Delta_i)}."""
  n, s = len(c_i), len(arrivals)
  c_new = c_i.copy()
  for i, (ct, _) in arrivals.items():
    c_new[i] = ct
  diff_sum = sum(c_new[i] - c_i[i] for i in arrivals)
  g_new = beta * (diff_sum / s + c) + (1 - beta) * g
  step = np.mean([d for _, d in arrivals.values()], axis=0) if adaptive else g_new
  theta_new = theta - gamma * step
  c_next = c + diff_sum / n
  return theta_new, c_new, c_next, g_new, beta * c_next + (1 - beta) * g_new


@pytest.mark.parametrize('adaptive', [False, True])
def test_one_server_step_matches_algorithm_1_and_3(adaptive, x64):
  rng = np.random.default_rng(2)
  n, gamma, beta = 4, 0.7, 0.3
  theta = rng.normal(size=3)
  c_i = rng.normal(size=(n, 3))
  state = init_state({'x': jnp.asarray(theta)}, {'x': jnp.asarray(c_i)}, adaptive=adaptive)
  np.testing.assert_allclose(state.control['x'], c_i.mean(0), rtol=1e-12)  # c^0
  np.testing.assert_allclose(state.momentum['x'], c_i.mean(0), rtol=1e-12)  # g^0 = c^0
  # Make c and g differ from mean c_i and c so that every term of line 5 matters.
  c, g = rng.normal(size=3), rng.normal(size=3)
  state = state._replace(control={'x': jnp.asarray(c)}, momentum={'x': jnp.asarray(g)})
  ids = np.array([3, 1, 0])
  mask = np.array([True, True, False])  # slot 2 is padding
  new_c, deltas = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
  msgs = MasFLMessage({'x': jnp.asarray(new_c)}, {'x': jnp.asarray(deltas)} if adaptive else None)
  arr = hand_arrivals(
    ids,
    mask,
    staleness=[2, 0, 0],
    num_steps=[2, 2, 1],
    start_broadcast=MasFLBroadcast({'x': jnp.zeros((3, 3))}, {'x': jnp.zeros((3, 3))}),
    step=5,
  )
  server = afl_jax.servers.masfl(gamma, beta, adaptive=adaptive)
  new, metrics = jax.jit(server.update)(state, msgs, arr, jax.random.key(0))
  want = _np_server_step(
    theta, c_i, c, g, {3: (new_c[0], deltas[0]), 1: (new_c[1], deltas[1])}, gamma, beta, adaptive
  )
  got = (
    new.params['x'],
    new.variates['x'],
    new.control['x'],
    new.momentum['x'],
    jax.jit(server.broadcast)(new).direction['x'],
  )
  for x, y in zip(got, want, strict=True):
    np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(metrics['update_norm'], np.linalg.norm(want[0] - theta))


def test_step_without_arrivals_changes_nothing():
  state = init_state({'x': jnp.ones(2)}, {'x': jnp.arange(6.0).reshape(3, 2)})
  arr = hand_arrivals([0, 0], [False, False])
  new, _ = afl_jax.servers.masfl(1.0, 0.5).update(
    state, MasFLMessage({'x': jnp.ones((2, 2))}, None), arr, jax.random.key(0)
  )
  for x, y in zip(jax.tree.leaves(new), jax.tree.leaves(state), strict=True):
    np.testing.assert_array_equal(x, y)


def test_uniform_selection_draws_distinct_clients_uniformly():
  n, s, draws = 5, 2, 4000
  keys = jax.random.split(jax.random.key(0), draws)
  sel = np.asarray(jax.jit(jax.vmap(lambda k: uniform_selection(k, n, jnp.int32(s))))(keys))
  assert (sel.sum(1) == s).all()  # exactly S distinct clients every round
  freq = sel.mean(0)  # each client w.p. S/N = 0.4; std of the mean ~ 0.0077
  np.testing.assert_allclose(freq, s / n, atol=0.03)


@pytest.mark.parametrize('adaptive', [False, True])
def test_literal_selection_step_and_unchanged_reselection_contributes_zero(adaptive, x64):
  """Alg. 1 as printed: a server buffer of latest updates, S drawn uniformly from N."""
  rng = np.random.default_rng(4)
  n, gamma, beta = 3, 0.5, 0.4
  theta, c_i = rng.normal(size=2), rng.normal(size=(n, 2))
  server = afl_jax.servers.masfl(gamma, beta, adaptive=adaptive, selection='uniform')
  state = init_state(
    {'x': jnp.asarray(theta)}, {'x': jnp.asarray(c_i)}, selection='uniform', adaptive=adaptive
  )
  upd = jax.jit(server.update)
  # NumPy mirror: the server's buffer of each client's latest (c~, Delta).
  buf_c, buf_d = c_i.copy(), np.zeros((n, 2))
  c, g = c_i.mean(0), c_i.mean(0)
  reselected_unchanged = False
  for t, (ids, mask) in enumerate(
    [([0, 2], [1, 1]), ([1, 0], [1, 0]), ([0, 0], [0, 0]), ([2, 0], [1, 0])]
  ):
    new_c, deltas = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    msgs = MasFLMessage({'x': jnp.asarray(new_c)}, {'x': jnp.asarray(deltas)} if adaptive else None)
    arr = hand_arrivals(ids, mask, step=t)
    key = jax.random.key(10 + t)
    for j in range(2):
      if mask[j]:
        buf_c[ids[j]], buf_d[ids[j]] = new_c[j], deltas[j]
    s = int(np.sum(mask))
    chosen = np.asarray(uniform_selection(key, n, jnp.int32(s)))
    state, _ = upd(state, msgs, arr, key)
    if s == 0:
      continue
    reselected_unchanged |= bool(np.any(chosen & np.all(buf_c == c_i, axis=1)))
    diff = (buf_c - c_i)[chosen]
    g = beta * (diff.sum(0) / s + c) + (1 - beta) * g
    theta = theta - gamma * (buf_d[chosen].sum(0) / s if adaptive else g)
    c = c + diff.sum(0) / n
    c_i[chosen] = buf_c[chosen]
    buf_d[chosen] = 0.0  # consumed: a re-selection without a new update adds 0
    np.testing.assert_allclose(state.params['x'], theta, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.momentum['x'], g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.control['x'], c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.variates['x'], c_i, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.control['x'], c_i.mean(0), rtol=1e-12, atol=1e-12)
  assert reselected_unchanged  # the case the option exists for was exercised


def test_normalized_step_has_unit_norm_and_zero_for_zero():
  g = {'a': jnp.array([3.0, 0.0]), 'b': jnp.array([[4.0]])}
  out = jax.jit(normalized)(g)
  np.testing.assert_allclose(out['a'], [0.6, 0.0], rtol=1e-6)
  np.testing.assert_allclose(out['b'], [[0.8]], rtol=1e-6)
  zero = jax.jit(normalized)({'a': jnp.zeros(2), 'b': jnp.zeros((1, 1))})
  assert all(np.array_equal(x, np.zeros_like(x)) for x in jax.tree.leaves(zero))


def test_theory_helpers_match_theorems_3_1_and_4_1():
  s, k, t, lips, tau = 10, 12, 600, 2.5, 4
  r = adamasfl_theory(s, k, t)
  np.testing.assert_allclose(r.server_lr, (s * k) ** 0.25 / t**0.75, rtol=1e-14)
  np.testing.assert_allclose(r.client_lr, 1 / (k * math.sqrt(t)), rtol=1e-14)
  np.testing.assert_allclose(r.beta, math.sqrt(s * k / t), rtol=1e-14)
  m = masfl_theory(s, 2, 6000, lips, tau)
  np.testing.assert_allclose(m.beta, math.sqrt(20 / 6000), rtol=1e-14)
  np.testing.assert_allclose(m.server_lr, math.sqrt(20 / 6000) / (4 * lips), rtol=1e-14)
  bound = math.sqrt(6000 - math.sqrt(20 * 6000) - 4 * 20 * tau**2) / (
    4 * math.sqrt(5) * math.e * 2 * lips * math.sqrt(6000)
  )
  np.testing.assert_allclose(m.client_lr, bound, rtol=1e-14)
  # Theorem 3.1's condition 1 - 4a - sqrt(SK/T) >= 0 holds at the bound (equality).
  a = tau**2 * m.beta**2 + 20 * math.e**2 * m.client_lr**2 * 4 * lips**2
  np.testing.assert_allclose(1 - 4 * a - math.sqrt(20 / 6000), 0.0, atol=1e-12)
  with pytest.raises(ValueError, match='num_rounds'):
    adamasfl_theory(10, 12, 100)  # beta = sqrt(SK/T) > 1
  with pytest.raises(ValueError, match='Theorem 3.1'):
    masfl_theory(s, k, t, lips, tau)  # T - sqrt(SKT) - 4SK tau^2 < 0
  with pytest.raises(ValueError, match='smoothness'):
    masfl_theory(s, 2, 6000, 0.0, tau)


@pytest.mark.parametrize('name', ['masfl', 'adamasfl'])
def test_prepare_takes_s_k_t_from_the_schedule(name, monkeypatch):
  """Theorem rates with no S, K, T given: the schedule's in prepare, STANDALONE alone."""
  rates, real = [], masfl_lib.build
  monkeypatch.setattr(masfl_lib, 'build', lambda n, *r, **kw: rates.append(r) or real(n, *r, **kw))
  sched = afl_jax.schedules.from_arrays(
    [[0, 1]] * 40, [[t, t] for t in range(40)], local_steps=3, num_clients=2
  )
  inputs = masfl_lib.schedule_inputs(sched)
  assert inputs == {'arrivals_per_step': 2, 'local_steps': 3, 'num_rounds': 40}
  alone = afl_jax.algorithms.get(name)
  standalone = afl_jax.algorithms.get(name, **masfl_lib.STANDALONE)
  assert rates[0] == rates[1] and alone.prepare is not None
  standalone_rates = rates[0]
  rates.clear()
  run = afl_jax.core.types.prepared(alone, sched)  # builds at the schedule's S, K, T
  afl_jax.algorithms.get(name, **inputs)
  assert rates[0] == rates[-1] != standalone_rates and run.prepare is None
  assert standalone.prepare is not None  # build's own (history depth)
