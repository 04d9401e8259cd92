"""Message compressors for asynchronous federated learning.

Pure, jittable, vmappable transforms of one client's upload, following Sec. III-B
and Algorithm 1 of Yang, Hou, Wu, "Convergence Analysis of Asynchronous Federated
Learning with Gradient Compression for Non-Convex Optimization" (Top-k, the
deterministic Sign quantizer, ``Q_s(Top_k)``, error feedback) and QSGD of
Alistarh et al., "QSGD: Communication-Efficient SGD via Gradient Quantization and
Encoding" (NeurIPS 2017).

Each factory returns a :class:`Compressor` ``(init, compress)`` with
``compress(updates, state, key) -> (message, new_state, bits)``.
"""

from afl_jax.compression._base import (
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
from afl_jax.compression._registry import COMPRESSORS, NAMES, PARAMS, defaults, get, takes
from afl_jax.compression._sparse import top_k

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
