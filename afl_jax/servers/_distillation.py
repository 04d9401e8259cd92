"""Uncertainty-aware distillation loss of FedEcho (eqs. 3-4) and its teacher.

Wang, Ma, Chen, "Stragglers Can Contribute More: Uncertainty-Aware Distillation for
Asynchronous Federated Learning". Given teacher probabilities ``p`` (the softmax of
the averaged client logits, Alg. 1 line 14) and student logits ``z`` on a batch B:

.. math::

  H^u = -\\sum_c p^u_c \\log p^u_c,\\qquad
  \\widehat H = \\frac{1}{\\log C}\\,\\frac{1}{|B|}\\sum_{u \\in B} H^u        \\quad (4)

  \\alpha = \\widehat H\\,\\alpha_{max} + (1 - \\widehat H)\\,\\alpha_{min}

  f_d = \\alpha\\, KL(p \\,\\|\\, \\sigma(z)) + (1 - \\alpha)\\, CE(z, \\arg\\max p)   \\quad (3)

Readings (docs/algorithms/fedecho.md): KL is summed over classes, both terms are averaged
over the batch, no temperature; ``alpha`` is a constant of the step (no gradient
flows through it). Option: the teacher is the mean of the clients' probabilities
(App. B) instead of the softmax of their mean logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from afl_jax.core import checks

TEACHERS = ('logits', 'probs')


def teacher_probs(logits: jax.Array, reported: jax.Array, teacher: str = 'logits') -> jax.Array:
  """The teacher's class probabilities from the stored client logits.

  Args:
    logits: ``[N, B, C]`` each client's stored logits on the batch.
    reported: ``bool[N]``, clients whose logits exist (S_u of Alg. 1 line 14).
    teacher: 'logits' (softmax of the mean logits, Alg. 1 line 14) or 'probs'
      (mean of the clients' softmax probabilities, App. B).

  Returns:
    ``[B, C]`` probabilities; the uniform distribution when no client reported.
  """
  checks.one_of('teacher', teacher, TEACHERS)
  w = reported.astype(logits.dtype)
  w = w / jnp.maximum(jnp.sum(w), 1.0)
  if teacher == 'logits':
    return jax.nn.softmax(jnp.tensordot(w, logits, axes=1), axis=-1)
  return jnp.tensordot(w, jax.nn.softmax(logits, axis=-1), axes=1)


def entropy(probs: jax.Array) -> jax.Array:
  """``H^u = -sum_c p_c log p_c`` per row (0 log 0 = 0)."""
  return -jnp.sum(jax.scipy.special.xlogy(probs, probs), axis=-1)


def normalized_batch_entropy(probs: jax.Array) -> jax.Array:
  """``H_hat = mean_u H^u / log C`` in [0, 1] (eq. 4)."""
  num_classes = probs.shape[-1]
  return jnp.mean(entropy(probs)) / jnp.log(jnp.asarray(num_classes, probs.dtype))


def dynamic_alpha(probs: jax.Array, alpha_min: float, alpha_max: float) -> jax.Array:
  """``alpha = H_hat * alpha_max + (1 - H_hat) * alpha_min``, as a constant."""
  h = jax.lax.stop_gradient(normalized_batch_entropy(probs))
  return h * alpha_max + (1.0 - h) * alpha_min


def kl_term(probs: jax.Array, student_logits: jax.Array) -> jax.Array:
  """``mean_u sum_c p_c (log p_c - log sigma(z)_c)``."""
  log_q = jax.nn.log_softmax(student_logits, axis=-1)
  return jnp.mean(jnp.sum(jax.scipy.special.xlogy(probs, probs) - probs * log_q, axis=-1))


def ce_term(probs: jax.Array, student_logits: jax.Array) -> jax.Array:
  """``mean_u -log sigma(z)_{argmax p}`` (hard labels from the teacher)."""
  log_q = jax.nn.log_softmax(student_logits, axis=-1)
  labels = jnp.argmax(probs, axis=-1)
  return -jnp.mean(jnp.take_along_axis(log_q, labels[:, None], axis=-1))


def distillation_loss(
  student_logits: jax.Array, probs: jax.Array, alpha: jax.Array | float
) -> jax.Array:
  """Eq. (3): ``alpha * KL(p || sigma(z)) + (1 - alpha) * CE(z, argmax p)``.

  Args:
    student_logits: ``[B, C]`` logits of the global (student) model.
    probs: ``[B, C]`` teacher probabilities (no gradient flows into them).
    alpha: the mixing weight (treated as a constant).
  """
  probs = jax.lax.stop_gradient(probs)
  alpha = jax.lax.stop_gradient(jnp.asarray(alpha, student_logits.dtype))
  return alpha * kl_term(probs, student_logits) + (1.0 - alpha) * ce_term(probs, student_logits)
