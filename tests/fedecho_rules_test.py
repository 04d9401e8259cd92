"""FedEcho's eqs. (3)-(4) and server rule (under jit) against NumPy on linear-softmax models
(App. B): eq. (3)'s gradient is ``U^T (softmax(UW) - a p - (1 - a) onehot(argmax p)) / |U|``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import hand_arrivals

import afl_jax
from afl_jax.algorithms import _fedecho as distillation

D, C, N = 3, 4, 4


def apply_fn(params, x):
  return x @ params['w']


def np_softmax(z):
  e = np.exp(z - z.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def np_teacher(logits, reported, teacher):
  """Alg. 1 line 14: average over the clients that reported (logits or probabilities)."""
  ys = [logits[i] for i in range(len(reported)) if reported[i]]
  if teacher == 'logits':
    return np_softmax(np.mean(ys, axis=0))
  return np.mean([np_softmax(y) for y in ys], axis=0)


def np_alpha(p, alpha_min, alpha_max):
  """Eq. (4): H^u = -sum_c p log p, H_hat = mean_u H^u / log C, then interpolate."""
  h = np.array([-sum(pc * np.log(pc) for pc in row if pc > 0) for row in p])
  h_hat = h.mean() / np.log(p.shape[1])
  return h_hat * alpha_max + (1 - h_hat) * alpha_min, h_hat


def np_loss(z, p, alpha):
  """Eq. (3): alpha KL(p || softmax z) + (1 - alpha) CE(z, argmax p), batch means."""
  q = np_softmax(z)
  kl = np.mean(
    [
      sum(pc * (np.log(pc) - np.log(qc)) for pc, qc in zip(pr, qr) if pc > 0)
      for pr, qr in zip(p, q)
    ]
  )
  ce = np.mean([-np.log(q[u, np.argmax(p[u])]) for u in range(len(p))])
  return alpha * kl + (1 - alpha) * ce


@pytest.mark.parametrize('teacher', ['logits', 'probs'])
def test_teacher_entropy_alpha_and_loss_match_eqs_3_4(teacher, x64):
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(5, 7, 4)) * 2.0
  reported = np.array([True, False, True, True, False])
  z = rng.normal(size=(7, 4))
  p = np_teacher(logits, reported, teacher)
  alpha, h_hat = np_alpha(p, 0.2, 0.8)
  got_p = distillation.teacher_probs(jnp.asarray(logits), jnp.asarray(reported), teacher)
  np.testing.assert_allclose(got_p, p, rtol=1e-12)
  np.testing.assert_allclose(distillation.normalized_batch_entropy(got_p), h_hat, rtol=1e-12)
  got_alpha = distillation.dynamic_alpha(got_p, 0.2, 0.8)
  np.testing.assert_allclose(got_alpha, alpha, rtol=1e-12)
  assert 0.2 <= alpha <= 0.8
  np.testing.assert_allclose(
    distillation.distillation_loss(jnp.asarray(z), got_p, got_alpha),
    np_loss(z, p, alpha),
    rtol=1e-12,
  )
  for fixed in (0.0, 0.5, 1.0):  # Table 7 ablation
    np.testing.assert_allclose(
      distillation.distillation_loss(jnp.asarray(z), got_p, fixed), np_loss(z, p, fixed), rtol=1e-12
    )


def test_entropy_extremes_and_zero_probabilities(x64):
  one_hot = jnp.eye(3)[jnp.array([0, 2, 1])]
  uniform = jnp.full((4, 3), 1 / 3)
  np.testing.assert_allclose(distillation.normalized_batch_entropy(one_hot), 0.0, atol=1e-15)
  np.testing.assert_allclose(distillation.normalized_batch_entropy(uniform), 1.0, rtol=1e-12)
  # Confident teacher -> alpha_min (mostly CE); uncertain teacher -> alpha_max (mostly KL).
  np.testing.assert_allclose(distillation.dynamic_alpha(one_hot, 0.2, 0.8), 0.2, rtol=1e-12)
  np.testing.assert_allclose(distillation.dynamic_alpha(uniform, 0.2, 0.8), 0.8, rtol=1e-12)
  mixed = jax.nn.softmax(jnp.arange(12.0).reshape(4, 3) / 4)
  np.testing.assert_allclose(distillation.dynamic_alpha(mixed, 0.4, 0.4), 0.4, rtol=1e-12)
  loss = distillation.distillation_loss(jnp.zeros((3, 3)), one_hot, 0.5)
  np.testing.assert_allclose(loss, np.log(3.0), rtol=1e-12)  # KL = CE = log 3, no NaN


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
  hp = dict(server_lr=eta_g, optimizer='sgd', distill_lr=eta_d, clip_norm=float('inf'))
  hp |= dict(distill_steps=q, alpha_mode=alpha_mode, alpha=1.0, teacher=teacher)
  rule = afl_jax.servers.fedecho(apply_fn, u, N, **hp)
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
      apply_fn, u, N, distill_lr=lr, clip_norm=nu, distill_steps=1, reset_distill_state=reset
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
    arrivals = _arrivals([t % N, (t + 1) % N, 3], starts, [True, True, False])
    state, metrics = update(state, zero, arrivals, jax.random.key(t))
    norms.append(np.linalg.norm(np.asarray(state.params['w']) - before))
    grads.append(float(metrics['distill_grad_norm']))
  norms, grads = np.array(norms), np.array(grads)
  assert (norms <= nu * lr * (1 + 1e-12)).all(), norms
  np.testing.assert_allclose(norms, lr * np.minimum(grads, nu), rtol=1e-9)
  if scale == 30.0:
    assert (grads > nu).all()  # the clip was exercised and the step is exactly nu * lr
