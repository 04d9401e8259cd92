"""Name -> compressor factory, for configs (``config.compressor.kind = 'top_k'``).

The names follow Sec. III-B of Yang, Hou, Wu, "Convergence Analysis of
Asynchronous Federated Learning with Gradient Compression for Non-Convex
Optimization" (AsynFLC uses ``top_k`` / ``sign`` / ``top_k_qsgd``; AsynFLC-EF
adds ``error_feedback=True``); ``qsgd`` is Alistarh et al. 2017. Each entry
records which of the config section's fields (``fraction``, ``bits``, ``scaled``)
its factory takes (:func:`takes`).
"""

from __future__ import annotations

from typing import Any

from afl_jax.compression._base import Compressor
from afl_jax.compression._dense import identity, sign
from afl_jax.compression._error_feedback import error_feedback as _error_feedback
from afl_jax.compression._qsgd import qsgd, top_k_qsgd
from afl_jax.compression._sparse import top_k
from afl_jax.registry import Registry

COMPRESSORS = Registry('compressor')
COMPRESSORS.register('identity', identity, takes=())
COMPRESSORS.register('top_k', top_k, takes=('fraction',))
COMPRESSORS.register('sign', sign, takes=('scaled',))
COMPRESSORS.register('qsgd', qsgd, takes=('bits',))
COMPRESSORS.register('top_k_qsgd', top_k_qsgd, takes=('fraction', 'bits', 'scaled'))

NAMES: tuple[str, ...] = ('identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd')


def takes(name: str) -> tuple[str, ...]:
  """The parameters (of ``fraction``, ``bits``, ``scaled``) compressor ``name`` takes."""
  return COMPRESSORS.meta(name)['takes']


def get(name: str, *, error_feedback: bool = False, **kwargs: Any) -> Compressor:
  """Builds a compressor by name.

  Args:
    name: one of ``NAMES`` (``identity``, ``top_k``, ``sign``, ``qsgd``,
      ``top_k_qsgd``).
    error_feedback: wrap the result with :func:`error_feedback`.
    **kwargs: the factory's arguments (e.g. ``fraction=0.1``, ``bits=4``).

  Returns:
    A :class:`Compressor`.

  Raises:
    ValueError: unknown name, or invalid factory arguments.
  """
  factory = COMPRESSORS.get(name)
  try:
    compressor = factory(**kwargs)
  except TypeError as err:
    raise ValueError(f'compressor {name!r}: invalid arguments {sorted(kwargs)}: {err}') from err
  return _error_feedback(compressor) if error_feedback else compressor
