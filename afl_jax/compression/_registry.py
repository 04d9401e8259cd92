"""Compressors by name, for configs (``config.compressor.kind = 'top_k'``) and users' own.

Each compressor is a registered function whose keyword arguments are its settings, with
the paper's defaults (Sec. III-B of Yang, Hou, Wu, "Convergence Analysis of Asynchronous
Federated Learning with Gradient Compression for Non-Convex Optimization"; Fig. 1: "top3"
= k/d 0.03, "Q4b" = QSGD with b = 4; Sign is unscaled; ``qsgd`` is Alistarh et al. 2017).
A config's ``compressor`` section names one (``kind``) and its settings; the section's
``error_feedback`` wraps any of them (AsynFLC-EF). A user registers their own like
every component (:mod:`afl_jax.registry`)::

  @compression.COMPRESSORS.register('rand_k', fraction=compression.PARAMS['fraction'])
  def rand_k(fraction: float = 0.1) -> compression.Compressor: ...

and ``config.compressor.kind = 'rand_k'`` names it (config.json records it).
"""

from __future__ import annotations

from typing import Any

from afl_jax.compression._base import Compressor
from afl_jax.compression._dense import identity as _identity
from afl_jax.compression._dense import sign as _sign
from afl_jax.compression._error_feedback import error_feedback as _error_feedback
from afl_jax.compression._qsgd import qsgd as _qsgd
from afl_jax.compression._qsgd import top_k_qsgd as _top_k_qsgd
from afl_jax.compression._sparse import top_k as _top_k
from afl_jax.core import checks
from afl_jax.registry import Registry

# The range of each setting several compressors share (a config's ``compressor`` section,
# AsynFLC's hyperparameters of the same names).
PARAMS: dict[str, checks.Spec] = {
  'fraction': checks.real(0.0, 1.0, low_open=True),  # k/d
  'bits': checks.integer(2, 32),  # b, bits per coordinate including the sign
  'scaled': checks.boolean(),
}

COMPRESSORS = Registry(
  'compressor', section='compressor', name_field='compressor.kind', shared=PARAMS
)


@COMPRESSORS.register('identity')
def identity() -> Compressor:
  """Every coordinate sent at full precision (counts the dense bits)."""
  return _identity()


@COMPRESSORS.register('top_k')
def top_k(fraction: float = 0.03) -> Compressor:
  """Top-k with k = ceil(fraction d)."""
  return _top_k(fraction)


@COMPRESSORS.register('sign')
def sign(scaled: bool = False) -> Compressor:
  """The deterministic Sign quantizer (times ||x||_1 / d when ``scaled``)."""
  return _sign(scaled)


@COMPRESSORS.register('qsgd')
def qsgd(bits: int = 4) -> Compressor:
  """QSGD with ``bits`` per coordinate including the sign."""
  return _qsgd(bits)


@COMPRESSORS.register('top_k_qsgd')
def top_k_qsgd(fraction: float = 0.03, bits: int = 4, scaled: bool = False) -> Compressor:
  """Q_s(Top_k): QSGD of the Top-k coordinates (divided by 1 + beta when ``scaled``)."""
  return _top_k_qsgd(fraction, bits, scaled=scaled)


# The built-in names (``COMPRESSORS.names()`` also lists the ones users register).
NAMES: tuple[str, ...] = ('identity', 'top_k', 'sign', 'qsgd', 'top_k_qsgd')


def defaults(name: str) -> dict[str, object]:
  """The settings compressor ``name`` takes, with their defaults."""
  return COMPRESSORS.defaults(name)


def takes(name: str) -> tuple[str, ...]:
  """The settings compressor ``name`` takes."""
  return tuple(COMPRESSORS.settings(name))


def get(name: str, *, error_feedback: bool = False, **settings: Any) -> Compressor:
  """Builds a compressor by name.

  Args:
    name: a registered name (``identity``, ``top_k``, ``sign``, ``qsgd``,
      ``top_k_qsgd``, or a user's).
    error_feedback: wrap the result with :func:`error_feedback`.
    **settings: its settings (e.g. ``fraction=0.1``, ``bits=4``), checked against
      their ranges (``COMPRESSORS.bind``).

  Raises:
    ValueError: unknown name; ConfigError (a ValueError) for an unknown setting or a
      value out of its range.
  """
  factory = COMPRESSORS.get(name)
  compressor = factory(**COMPRESSORS.bind(name, settings, in_config=False))
  return _error_feedback(compressor) if error_feedback else compressor
