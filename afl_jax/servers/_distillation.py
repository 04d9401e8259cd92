"""FedEcho's uncertainty-aware distillation loss (Wang, Ma, Chen, eqs. (3)-(4)) and its
teacher: ``f_d = alpha KL(p || softmax(z)) + (1 - alpha) CE(z, argmax p)`` with ``alpha``
interpolated by the teacher's normalized batch entropy (a constant of the step); KL
summed over classes, both terms averaged over the batch, no temperature
(docs/algorithms/fedecho.md, "What runs").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

TEACHERS = ('logits', 'probs')


def teacher_probs(logits: jax.Array, reported: jax.Array, teacher: str = 'logits') -> jax.Array:
  """``[B, C]`` teacher probabilities from the clients' stored logits ``[N, B, C]`` of
  those ``reported``: the softmax of their mean (``'logits'``, Alg. 1 line 14) or the mean
  of their softmax (``'probs'``, App. B); uniform when none reported."""
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
  """Eq. (3) for the student's logits ``[B, C]``; no gradient flows into ``probs`` or
  ``alpha``."""
  probs = jax.lax.stop_gradient(probs)
  alpha = jax.lax.stop_gradient(jnp.asarray(alpha, student_logits.dtype))
  return alpha * kl_term(probs, student_logits) + (1.0 - alpha) * ce_term(probs, student_logits)
