"""Message compressors (Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated
Learning with Gradient Compression for Non-Convex Optimization", Sec. III-B, Alg. 1; QSGD
of Alistarh et al., NeurIPS 2017): ``afl_jax.compression.<name>(**settings)`` builds the
registered :class:`Compressor` of that name, its settings checked at the call; the
defaults are the paper's (Fig. 1: "top3" = k/d 0.03, "Q4b" = QSGD with b = 4).
"""

from typing import Any

from afl_jax.compression import _error_feedback
from afl_jax.compression._base import (
  COMPRESSORS,
  PARAMS,
  VALUE_BITS,
  Compressor,
  CompressorState,
  EmptyState,
  Updates,
  count_bytes,
  dense_bits,
  identity_bits,
  index_bits,
  num_kept,
  qsgd_bits,
  sign_bits,
  top_k_bits,
  top_k_qsgd_bits,
  tree_size,
)
from afl_jax.compression._dense import identity, paper_sign, sign
from afl_jax.compression._error_feedback import ErrorFeedbackState, error_feedback
from afl_jax.compression._qsgd import qsgd, top_k_qsgd
from afl_jax.compression._sparse import top_k

NAMES: tuple[str, ...] = ('identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd')  # the built-in ones


def defaults(name: str) -> dict[str, object]:
  """The settings compressor ``name`` takes, with their defaults."""
  return COMPRESSORS.defaults(name)


def takes(name: str) -> tuple[str, ...]:
  """The settings compressor ``name`` takes."""
  return tuple(COMPRESSORS.settings(name))


def get(name: str, *, error_feedback: bool = False, **settings: Any) -> Compressor:
  """The compressor ``name`` with ``settings`` (checked: ``ConfigError`` naming the one
  unknown or out of range), wrapped in error feedback when asked."""
  compressor = COMPRESSORS.get(name)(**COMPRESSORS.bind(name, settings, in_config=False))
  return _error_feedback.error_feedback(compressor) if error_feedback else compressor


__all__ = [
  'COMPRESSORS',
  'NAMES',
  'PARAMS',
  'VALUE_BITS',
  'Compressor',
  'CompressorState',
  'EmptyState',
  'ErrorFeedbackState',
  'Updates',
  'count_bytes',
  'defaults',
  'dense_bits',
  'error_feedback',
  'get',
  'identity',
  'identity_bits',
  'index_bits',
  'num_kept',
  'paper_sign',
  'qsgd',
  'qsgd_bits',
  'sign',
  'sign_bits',
  'takes',
  'top_k',
  'top_k_bits',
  'top_k_qsgd',
  'top_k_qsgd_bits',
  'tree_size',
]
