"""FedGM's server rule under jit against Sun et al.'s eq. (2), its special cases (Sec. 3) and
Alg. 3's stagewise schedule."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from quadratic import hand_arrivals

import afl_jax
from afl_jax.algorithms._fedgm import OPTIMIZERS

DIM = 3


def _run_server(server, x0, messages, masks):
  """Apply ``server.update`` under jax.jit; returns the params and metrics of every step."""
  state = server.init({'x': jnp.asarray(x0)})
  update = jax.jit(chex.assert_max_traces(server.update, n=1))
  xs, metrics = [], []
  for t, (msg, mask) in enumerate(zip(messages, masks, strict=True)):
    arrivals = hand_arrivals(np.arange(len(mask)), mask, step=t)
    state, m = update(state, {'x': jnp.asarray(msg)}, arrivals, jax.random.key(t))
    xs.append(np.asarray(state.params['x']))
    metrics.append({k: float(v) for k, v in m.items()})
  chex.clear_trace_counter()
  return np.stack(xs), metrics


def _np_fedgm(x0, deltas, hparams):
  """Eq. (2) from d_0 = 0: hparams[t] = (eta, beta, nu) applied at step t."""
  x, d, out = np.array(x0, np.float64), np.zeros_like(x0, np.float64), []
  for delta, (eta, beta, nu) in zip(deltas, hparams, strict=True):
    d = (1 - beta) * delta + beta * d
    h = (1 - nu) * delta + nu * d
    x = x - eta * h
    out.append(x)
  return np.stack(out)


def _messages(steps=6, slots=3, seed=0):
  """Messages [T, M, DIM], masks [T, M] with padding, and the masked means Delta_t."""
  rng = np.random.default_rng(seed)
  msgs = rng.normal(size=(steps, slots, DIM))
  masks = np.ones((steps, slots), bool)
  masks[1, 2] = masks[3, 0] = masks[3, 1] = False
  msgs[~masks] = 1e6  # padding must never leak into the mean
  means = np.stack([msgs[t][masks[t]].mean(axis=0) for t in range(steps)])
  return msgs, masks, means


@pytest.mark.parametrize('eta,beta,nu', [(1.0, 0.9, 0.7), (0.3, 0.5, 0.95), (2.5, 0.0, 0.4)])
def test_fedgm_server_under_jit_matches_eq2(eta, beta, nu, x64):
  msgs, masks, means = _messages()
  x0 = np.linspace(-1, 1, DIM)
  got, metrics = _run_server(afl_jax.servers.fedgm(eta, beta, nu), x0, msgs, masks)
  want = _np_fedgm(x0, means, [(eta, beta, nu)] * len(means))
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  assert (metrics[0]['server_lr'], metrics[0]['beta'], metrics[0]['nu']) == (eta, beta, nu)


def _heavy_ball(x0, means, eta, beta):
  """Hsu et al.'s v = beta v + Delta, x <- x - eta (1 - beta) v."""
  x, v, out = x0.copy(), np.zeros(DIM), []
  for delta in means:
    v = beta * v + delta
    x = x - eta * (1 - beta) * v
    out.append(x)
  return np.stack(out)


def _nesterov(x0, means, eta, beta):
  """x <- x - eta [(1 - beta) Delta_t + beta d_{t+1}]."""
  x, d, out = x0.copy(), np.zeros(DIM), []
  for delta in means:
    d = (1 - beta) * delta + beta * d
    x = x - eta * ((1 - beta) * delta + beta * d)
    out.append(x)
  return np.stack(out)


@pytest.mark.parametrize(
  'name,hp,closed_form',
  [
    ('fedavgm', dict(server_lr=0.7, beta=0.9), _heavy_ball),
    ('fednag', dict(server_lr=1.3, beta=0.7), _nesterov),
    ('fedsgd', dict(server_lr=0.4), lambda x0, m, eta: x0 - eta * np.cumsum(m, axis=0)),
  ],
)
def test_special_cases_match_their_closed_forms(name, hp, closed_form, x64):
  """Sec. 3: nu = 1 (heavy ball), nu = beta (Nesterov), nu = 0 (a plain step)."""
  msgs, masks, means = _messages(seed=2)
  x0 = np.linspace(1, 2, DIM)
  got, _ = _run_server(afl_jax.algorithms.make(name, **hp).server, x0, msgs, masks)
  expected = closed_form(x0, means, *hp.values())
  np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
  if name == 'fedavgm':  # = optax.sgd(eta (1 - beta), momentum=beta)
    sgd = optax.sgd(hp['server_lr'] * (1 - hp['beta']), hp['beta'])
    hsu, _ = _run_server(afl_jax.servers.optimizer_server(sgd), x0, msgs, masks)
    np.testing.assert_allclose(got, hsu, rtol=1e-12, atol=1e-12)


def test_stagewise_constant_switches_at_zero_based_boundaries():
  sched = afl_jax.servers.stagewise_constant([3.0, 2.0, 1.0], [2, 1, 3])
  values = [float(sched(jnp.int32(t))) for t in range(9)]
  assert values == [3.0, 3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
  assert float(afl_jax.servers.stagewise_constant([0.5], [4])(jnp.int32(100))) == 0.5


@pytest.mark.parametrize('name', OPTIMIZERS)
def test_every_fedopt_optimizer_runs_under_jit(name):
  msgs, masks, _ = _messages(seed=6)
  x0, msgs = np.zeros(DIM, np.float32), msgs.astype(np.float32)
  got, metrics = _run_server(afl_jax.servers.fedopt(name, 0.1), x0, msgs, masks)
  assert np.isfinite(got).all() and got.dtype == np.float32
  assert not np.allclose(got[-1], 0.0)
  assert 'update_norm' in metrics[0]
