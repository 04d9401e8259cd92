"""CA2FL (Wang et al., ICLR 2024, Alg. 1) and FADAS (Wang et al., ICML 2024, Alg. 1, with the
delay-adaptive rate) against NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import (
  check_fresh_is_fedbuff,
  np_local_gd,
  np_replay,
  simulate_quadratic,
  stale_setup,
)

from afl_jax.algorithms._fadas import delay_adaptive_rate
from afl_jax.servers import ca2fl


def _np_replay(schedule, a, b, x0, lr, server_step):
  """quadratic.np_replay with ``server_step(x, ids, deltas, taus) -> x_next``.

  deltas are the library's pseudo-gradients x_start - x_local.
  """

  def step(x, locals_, starts, taus, ids):
    return server_step(x, ids, [xs - xl for xl, xs in zip(locals_, starts)], taus)

  return np_replay(schedule, a, b, x0, lr, step, with_ids=True)


def _ca2fl_ref(num_clients, eta):
  cache = {}

  def step(x, ids, deltas, taus):
    del taus
    h = lambda i: cache.get(i, np.zeros_like(x))
    h_mean = sum(h(i) for i in range(num_clients)) / num_clients
    v = h_mean + np.mean([d - h(i) for i, d in zip(ids, deltas)], axis=0)
    for i, d in zip(ids, deltas):  # h_i <- Delta_i after the step
      cache[i] = d
    return x - eta * v  # the paper's x + eta v with Delta = x_local - x_start

  return step


def _fadas_ref(eta, beta1, beta2, eps, tau_c, rule, bias_correction, adaptive=True):
  st = {'m': 0.0, 'v': 0.0, 'vhat': 0.0, 't': 0}

  def step(x, ids, deltas, taus):
    del ids
    d = np.mean(deltas, axis=0)
    st['t'] += 1
    st['m'] = beta1 * st['m'] + (1 - beta1) * d
    st['v'] = beta2 * st['v'] + (1 - beta2) * d * d
    st['vhat'] = np.maximum(st['vhat'], st['v'])
    m, denom = st['m'], np.sqrt(st['vhat'])
    if bias_correction:
      m = m / (1 - beta1 ** st['t'])
      denom = denom / np.sqrt(1 - beta2 ** st['t'])
    tau = max(taus)
    rate = eta
    if adaptive and tau > tau_c:
      rate = min(eta, 1.0 / tau) if rule == 'min_inverse' else eta / tau
    return x - rate * m / (denom + eps)

  return step


def test_ca2fl_matches_numpy_over_stale_schedule(x64):
  a, b, x0, sched = stale_setup()
  res = simulate_quadratic('ca2fl', a, b, x0, sched, client_lr=0.3, server_lr=0.8)
  want = _np_replay(sched, a, b, x0, 0.3, _ca2fl_ref(3, 0.8))
  np.testing.assert_allclose(res.params_history['x'], want, rtol=1e-10, atol=1e-10)
  # The cache holds each client's latest Delta (client 2 last arrived at step 4 from s=1).
  cache = np.asarray(res.final_state.server.cache['x'])
  hist = np.concatenate([x0[None], np.asarray(res.params_history['x'])])
  np.testing.assert_allclose(
    cache[2], hist[1] - np_local_gd(a[2], b[2], hist[1], 0.3, 1), rtol=1e-10, atol=1e-10
  )


def test_ca2fl_full_fresh_participation_is_fedbuff(x64):
  check_fresh_is_fedbuff('ca2fl', 5)


@pytest.mark.parametrize(
  'rule,bias_correction,adaptive',
  [('min_inverse', False, True), ('divide', True, True), ('min_inverse', False, False)],
)
def test_fadas_matches_numpy_amsgrad_with_delay_adaptive_rate(rule, bias_correction, adaptive, x64):
  a, b, x0, sched = stale_setup()
  hp = dict(server_lr=0.6, beta1=0.8, beta2=0.95, epsilon=1e-3, tau_c=1, client_lr=0.3)
  hp |= dict(delay_rule=rule, bias_correction=bias_correction, delay_adaptive=adaptive)
  res = simulate_quadratic('fadas', a, b, x0, sched, **hp)
  ref = _fadas_ref(0.6, 0.8, 0.95, 1e-3, 1, rule, bias_correction, adaptive)
  want = _np_replay(sched, a, b, x0, 0.3, ref)
  np.testing.assert_allclose(res.params_history['x'], want, rtol=1e-10, atol=1e-10)
  taus = [0, 1, 2, 3, 3, 3]
  rates = [
    0.6 if not adaptive or tau <= 1 else (min(0.6, 1 / tau) if rule == 'min_inverse' else 0.6 / tau)
    for tau in taus
  ]
  np.testing.assert_allclose(res.metrics['server/server_lr'], rates, rtol=1e-12)
  np.testing.assert_array_equal(res.metrics['server/tau_max'], taus)


def test_fadas_delay_adaptive_rate_under_jit():
  rate = jax.jit(delay_adaptive_rate, static_argnums=(2, 3))
  np.testing.assert_allclose(rate(0.5, jnp.int32(4), 2, 'min_inverse'), 0.25, rtol=1e-6)
  np.testing.assert_allclose(rate(0.1, jnp.int32(4), 2, 'min_inverse'), 0.1, rtol=1e-6)
  np.testing.assert_allclose(rate(0.1, jnp.int32(4), 2, 'divide'), 0.025, rtol=1e-6)
  np.testing.assert_allclose(rate(0.1, jnp.int32(2), 2, 'divide'), 0.1, rtol=1e-6)


def test_ca2fl_server_sizes_its_cache_by_num_clients():
  assert ca2fl(1.0, num_clients=4).init({'x': jnp.zeros(2)}).cache['x'].shape == (4, 2)
