"""Message compressors (Yang, Hou, Wu, Sec. III-B, Alg. 1; QSGD of Alistarh et al. 2017):
``afl_jax.compression.<name>(**settings)`` or ``make(name, **settings)`` builds one, ``names()``
lists them, ``settings(name)`` gives a compressor's settings; the defaults are the paper's Fig. 1
("top3", "Q4b"); :func:`error_feedback` wraps any of them (docs/algorithms/asynfl.md)."""

from afl_jax.compression._base import (
  COMPRESSORS,
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

make, names, settings, register = COMPRESSORS.verbs()

__all__ = [
  'COMPRESSORS',
  'VALUE_BITS',
  'Compressor',
  'CompressorState',
  'EmptyState',
  'ErrorFeedbackState',
  'Updates',
  'count_bytes',
  'dense_bits',
  'error_feedback',
  'identity',
  'identity_bits',
  'index_bits',
  'make',
  'names',
  'num_kept',
  'paper_sign',
  'qsgd',
  'qsgd_bits',
  'register',
  'settings',
  'sign',
  'sign_bits',
  'top_k',
  'top_k_bits',
  'top_k_qsgd',
  'top_k_qsgd_bits',
  'tree_size',
]
