"""MasFL / AdaMasFL: the literal uniform selection (Alg. 1) against NumPy, an empty step, and the
theorem rates' schedule inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import hand_arrivals

import afl_jax
from afl_jax.algorithms import _masfl as masfl_lib
from afl_jax.algorithms._masfl import MasFLMessage, init_state, uniform_selection


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
  alone = afl_jax.algorithms.make(name)
  standalone = afl_jax.algorithms.make(name, **masfl_lib.STANDALONE)
  assert rates[0] == rates[1] and alone.prepare is not None
  standalone_rates = rates[0]
  rates.clear()
  run = afl_jax.core.types.prepared(alone, sched)  # builds at the schedule's S, K, T
  afl_jax.algorithms.make(name, **inputs)
  assert rates[0] == rates[-1] != standalone_rates and run.prepare is None
  assert standalone.prepare is not None  # build's own (history depth)
