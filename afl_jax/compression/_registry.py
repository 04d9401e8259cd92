"""Name -> compressor factory, for configs (``config.compressor.kind = 'top_k'``).

The names follow Sec. III-B of Yang, Hou, Wu, "Convergence Analysis of
Asynchronous Federated Learning with Gradient Compression for Non-Convex
Optimization" (AsynFLC uses ``top_k`` / ``sign`` / ``top_k_qsgd``; AsynFLC-EF
adds ``error_feedback=True``); ``qsgd`` is Alistarh et al. 2017. Each entry
records which of the parameters ``fraction``, ``bits``, ``scaled`` its factory takes,
with the paper's defaults (:func:`defaults`; Fig. 1: "top3" = k/d 0.03, "Q4b" = QSGD
with b = 4; Sign is unscaled, Sec. III-B); :data:`PARAMS` says what each accepts.
"""

from __future__ import annotations

from typing import Any

from afl_jax.compression._base import Compressor
from afl_jax.compression._dense import identity, sign
from afl_jax.compression._error_feedback import error_feedback as _error_feedback
from afl_jax.compression._qsgd import qsgd, top_k_qsgd
from afl_jax.compression._sparse import top_k
from afl_jax.core import checks
from afl_jax.registry import Registry

# What each compressor parameter accepts (a config's ``compressor`` section, AsynFLC's
# hyperparameters of the same names).
PARAMS: dict[str, checks.Spec] = {
  'fraction': checks.real(0.0, 1.0, low_open=True),  # k/d
  'bits': checks.integer(2, 32),  # b, bits per coordinate including the sign
  'scaled': checks.boolean(),
}

COMPRESSORS = Registry('compressor')
COMPRESSORS.register('identity', identity, defaults={})
COMPRESSORS.register('top_k', top_k, defaults={'fraction': 0.03})
COMPRESSORS.register('sign', sign, defaults={'scaled': False})
COMPRESSORS.register('qsgd', qsgd, defaults={'bits': 4})
COMPRESSORS.register(
  'top_k_qsgd', top_k_qsgd, defaults={'fraction': 0.03, 'bits': 4, 'scaled': False}
)

NAMES: tuple[str, ...] = ('identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd')


def defaults(name: str) -> dict[str, object]:
  """The parameters (of :data:`PARAMS`) compressor ``name`` takes, with the paper's defaults."""
  return dict(COMPRESSORS.meta(name)['defaults'])


def takes(name: str) -> tuple[str, ...]:
  """The parameters (of ``fraction``, ``bits``, ``scaled``) compressor ``name`` takes."""
  return tuple(defaults(name))


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
