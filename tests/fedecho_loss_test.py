"""FedEcho's distillation math against eqs. (2)-(4) and App. B, computed in NumPy.

Wang, Ma, Chen, "Stragglers Can Contribute More: Uncertainty-Aware Distillation for
Asynchronous Federated Learning". The server rule is tested in fedecho_server_test.py
and through the engine in fedecho_replay_test.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import afl_jax
from afl_jax.servers import _distillation as distillation

D, N = 3, 4


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
      distillation.distillation_loss(jnp.asarray(z), got_p, fixed),
      np_loss(z, p, fixed),
      rtol=1e-12,
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


def test_loss_gradient_in_logits_is_closed_form(x64):
  """d f_d / d z = (softmax z - alpha p - (1 - alpha) onehot(argmax p)) / |B| (App. B)."""
  rng = np.random.default_rng(1)
  z, p = rng.normal(size=(6, 5)), np_softmax(rng.normal(size=(6, 5)))
  alpha = 0.35
  grad = jax.grad(distillation.distillation_loss)(jnp.asarray(z), jnp.asarray(p), alpha)
  e = np.eye(5)[np.argmax(p, axis=1)]
  np.testing.assert_allclose(
    grad, (np_softmax(z) - alpha * p - (1 - alpha) * e) / 6, rtol=1e-10, atol=1e-14
  )


def test_clip_inf_is_plain_sgd_and_clip_bounds_the_update():
  g = {'w': jnp.full((3, 4), 100.0)}  # ||g|| = 100 sqrt(12)
  free = afl_jax.servers.distill_optimizer('sgd', 0.1, float('inf'))
  upd, _ = free.update(g, free.init(g))
  np.testing.assert_allclose(upd['w'], -10.0, rtol=1e-6)
  clipped = afl_jax.servers.distill_optimizer('sgd', 0.1, 5.0)
  upd, _ = clipped.update(g, clipped.init(g))
  np.testing.assert_allclose(np.linalg.norm(upd['w']), 0.5, rtol=1e-6)
