"""FedEcho's server rule called directly under ``jax.jit``, against NumPy closed forms.

Student and teachers are linear-softmax models (logits = U W), the setting of App. B
of Wang, Ma, Chen, "Stragglers Can Contribute More: Uncertainty-Aware Distillation
for Asynchronous Federated Learning", where the distillation gradient of eq. (3) is
``U^T (softmax(U W) - alpha p - (1 - alpha) onehot(argmax p)) / |U|``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fedecho_loss_test import apply_fn, np_alpha, np_softmax, np_teacher
from quadratic import hand_arrivals

import afl_jax

D, C, N = 3, 4, 4


def _arrivals(ids, starts, mask):
  return hand_arrivals(ids, mask, start_broadcast={'w': jnp.asarray(starts)})


def _setup(seed=0, scale=1.0):
  rng = np.random.default_rng(seed)
  u = rng.normal(size=(9, D)) * scale
  x0 = rng.normal(size=(D, C))
  starts = rng.normal(size=(3, D, C))
  msgs = rng.normal(size=(3, D, C)) * 0.5
  return u, x0, starts, msgs


def _np_step(u, x_hat, p, alpha):
  """Closed-form gradient of eq. (3) for logits U W: U^T (softmax(UW) - a p - (1-a) e) / |U|."""
  e = np.eye(C)[np.argmax(p, axis=1)]
  return u.T @ (np_softmax(u @ x_hat) - alpha * p - (1 - alpha) * e) / len(u)


@pytest.mark.parametrize('teacher,alpha_mode', [('logits', 'dynamic'), ('probs', 'fixed')])
def test_server_step_is_fedbuff_then_closed_form_distillation(teacher, alpha_mode, x64):
  u, x0, starts, msgs = _setup()
  eta_g, eta_d, q = 0.7, 0.3, 2
  rule = afl_jax.servers.fedecho(
    apply_fn,
    u,
    N,
    server_lr=eta_g,
    optimizer='sgd',
    distill_lr=eta_d,
    clip_norm=float('inf'),
    distill_steps=q,
    alpha_mode=alpha_mode,
    alpha=1.0,
    teacher=teacher,
  )
  state = rule.init({'w': jnp.asarray(x0)})
  ids, mask = [2, 0, 3], [True, True, False]  # slot 2 is padding: client 3 never reports
  state, metrics = jax.jit(rule.update)(
    state, {'w': jnp.asarray(msgs)}, _arrivals(ids, starts, mask), jax.random.key(0)
  )
  # NumPy: Alg. 1 line 5 (client models), line 11 (FedBuff step), lines 12-16.
  local = {i: starts[j] - msgs[j] for j, i in enumerate(ids) if mask[j]}
  x = x0 - eta_g * np.mean([msgs[j] for j in range(3) if mask[j]], axis=0)
  stored = np.zeros((N, len(u), C))
  for i, w in local.items():
    stored[i] = u @ w
  reported = np.array([i in local for i in range(N)])
  p = np_teacher(stored, reported, teacher)
  alpha = np_alpha(p, 0.2, 0.8)[0] if alpha_mode == 'dynamic' else 1.0
  if teacher == 'probs':  # App. B eq. (8): teacher = mean of the clients' softmax outputs.
    p_b = np.mean([np_softmax(u @ w) for w in local.values()], axis=0)
    np.testing.assert_allclose(p, p_b, rtol=1e-12)
  for _ in range(q):
    x = x - eta_d * _np_step(u, x, p, alpha)
  np.testing.assert_allclose(state.params['w'], x, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(state.logits, stored, rtol=1e-12, atol=1e-12)
  np.testing.assert_array_equal(state.reported, reported)
  np.testing.assert_allclose(metrics['alpha'], alpha, rtol=1e-10)
  assert float(metrics['teachers']) == 2


def test_adam_default_first_step_clips_then_normalizes(x64):
  """chain(clip(nu), adam): a fresh Adam step is -lr * g_c / (|g_c| + eps), g_c clipped.

  With reset_distill_state=True every server step starts a fresh Adam, so the second
  server step is again of that form; carrying the state (default) changes it.
  """
  u, x0, starts, msgs = _setup(seed=3, scale=5.0)
  nu, lr = 0.05, 0.01
  stored = np.stack([u @ starts[j] for j in range(3)])
  p = np_teacher(stored, [True] * 3, 'logits')
  alpha, _ = np_alpha(p, 0.2, 0.8)
  args = (
    {'w': jnp.zeros_like(jnp.asarray(msgs))},
    _arrivals([1, 2, 0], starts, [True] * 3),
    jax.random.key(0),
  )
  second = {}
  for reset in (True, False):
    rule = afl_jax.servers.fedecho(
      apply_fn,
      u,
      N,
      distill_lr=lr,
      clip_norm=nu,
      distill_steps=1,
      reset_distill_state=reset,
    )
    update = jax.jit(rule.update)
    x = x0
    state = rule.init({'w': jnp.asarray(x0)})
    for step in range(2):
      state, _ = update(state, *args)
      g = _np_step(u, x, p, alpha)
      assert np.linalg.norm(g) > nu  # clipping is active in this case
      g_c = g * nu / np.linalg.norm(g)
      x = x - lr * g_c / (np.abs(g_c) + 1e-8)
      if step == 0 or reset:
        np.testing.assert_allclose(state.params['w'], x, rtol=1e-9, atol=1e-12)
    second[reset] = np.asarray(state.params['w'])
  assert np.abs(second[True] - second[False]).max() > 1e-4


@pytest.mark.parametrize('scale', [0.1, 30.0])
def test_sgd_steps_never_exceed_nu_times_lr(scale, x64):
  u, x0, starts, msgs = _setup(seed=2, scale=scale)
  nu, lr = 0.2, 0.5
  rule = afl_jax.servers.fedecho(
    apply_fn, u, N, optimizer='sgd', distill_lr=lr, clip_norm=nu, distill_steps=1, distill_batch=4
  )
  update = jax.jit(rule.update)
  state = rule.init({'w': jnp.asarray(x0)})
  zero = {'w': jnp.zeros_like(jnp.asarray(msgs))}
  norms, grads = [], []
  for t in range(5):  # zero messages: every move is one distillation step
    before = np.asarray(state.params['w'])
    state, metrics = update(
      state,
      zero,
      _arrivals([t % N, (t + 1) % N, 3], starts, [True, True, False]),
      jax.random.key(t),
    )
    norms.append(np.linalg.norm(np.asarray(state.params['w']) - before))
    grads.append(float(metrics['distill_grad_norm']))
  norms, grads = np.array(norms), np.array(grads)
  assert (norms <= nu * lr * (1 + 1e-12)).all(), norms
  np.testing.assert_allclose(norms, lr * np.minimum(grads, nu), rtol=1e-9)
  if scale == 30.0:
    assert (grads > nu).all()  # the clip was exercised and the step is exactly nu * lr


def test_fixed_alpha_equals_dynamic_with_equal_bounds(x64):
  u, x0, starts, msgs = _setup(seed=4)
  args = ({'w': jnp.asarray(msgs)}, _arrivals([0, 1, 2], starts, [True] * 3), jax.random.key(0))
  out = []
  for kw in (dict(alpha_mode='fixed', alpha=0.4), dict(alpha_min=0.4, alpha_max=0.4)):
    rule = afl_jax.servers.fedecho(
      apply_fn, u, N, optimizer='sgd', distill_lr=0.2, clip_norm=np.inf, distill_steps=3, **kw
    )
    out.append(jax.jit(rule.update)(rule.init({'w': jnp.asarray(x0)}), *args)[0].params['w'])
  np.testing.assert_allclose(out[0], out[1], rtol=1e-12)
  assert np.abs(out[0] - x0).max() > 1e-3
