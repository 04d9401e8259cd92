"""Message compressors (Yang, Hou, Wu, Sec. III-B, Alg. 1; QSGD of Alistarh et al. 2017):
``afl_jax.compression.<name>(**settings)``; the defaults are the paper's Fig. 1 ("top3", "Q4b")
(docs/algorithms/asynfl.md)."""

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

NAMES: tuple[str, ...] = tuple(COMPRESSORS.names())  # the built-in ones, as registered


def defaults(name: str) -> dict[str, object]:
  return COMPRESSORS.defaults(name)


def takes(name: str) -> tuple[str, ...]:
  return tuple(COMPRESSORS.settings(name))


def get(name: str, *, error_feedback: bool = False, **settings: Any) -> Compressor:
  """The compressor ``name`` with ``settings`` checked, wrapped in error feedback when asked."""
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
