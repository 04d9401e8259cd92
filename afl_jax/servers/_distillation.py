"""FedEcho's distillation loss and teacher (Wang, Ma, Chen, eqs. (3)-(4);
docs/algorithms/fedecho.md, "What runs")."""

from __future__ import annotations

import jax
import jax.numpy as jnp

TEACHERS = ('logits', 'probs')


def teacher_probs(logits: jax.Array, reported: jax.Array, teacher: str = 'logits') -> jax.Array:
  """``[B, C]`` teacher of the reported clients' logits ``[N, B, C]``: softmax of the mean
  (``'logits'``, Alg. 1 line 14) or mean of softmaxes (``'probs'``, App. B); uniform when none."""
  w = reported.astype(logits.dtype)
  w = w / jnp.maximum(jnp.sum(w), 1.0)
  if teacher == 'logits':
    return jax.nn.softmax(jnp.tensordot(w, logits, axes=1), axis=-1)
  return jnp.tensordot(w, jax.nn.softmax(logits, axis=-1), axes=1)


def entropy(probs: jax.Array) -> jax.Array:
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
  log_q = jax.nn.log_softmax(student_logits, axis=-1)
  return jnp.mean(jnp.sum(jax.scipy.special.xlogy(probs, probs) - probs * log_q, axis=-1))


def ce_term(probs: jax.Array, student_logits: jax.Array) -> jax.Array:
  log_q = jax.nn.log_softmax(student_logits, axis=-1)
  labels = jnp.argmax(probs, axis=-1)
  return -jnp.mean(jnp.take_along_axis(log_q, labels[:, None], axis=-1))


def distillation_loss(
  student_logits: jax.Array, probs: jax.Array, alpha: jax.Array | float
) -> jax.Array:
  """Eq. (3); no gradient flows into ``probs`` or ``alpha``."""
  probs = jax.lax.stop_gradient(probs)
  alpha = jax.lax.stop_gradient(jnp.asarray(alpha, student_logits.dtype))
  return alpha * kl_term(probs, student_logits) + (1.0 - alpha) * ce_term(probs, student_logits)
