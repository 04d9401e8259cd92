"""Registry of algorithms by name: ``get('fedbuff', client_lr=0.01, server_lr=1.0)``.

Each algorithm family lives in its own module and registers a factory with
:func:`register`; the factory's keyword arguments are the algorithm's
hyperparameters (documented in docs/algorithms.md next to the paper's symbols).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from afl_jax.core.types import Algorithm

_REGISTRY: dict[str, Callable[..., Algorithm]] = {}


def register(name: str) -> Callable[[Callable[..., Algorithm]], Callable[..., Algorithm]]:
  """Decorator: register ``factory(**hparams) -> Algorithm`` under ``name``."""

  def deco(factory):
    if name in _REGISTRY:
      raise ValueError(f'algorithm {name!r} is registered twice.')
    _REGISTRY[name] = factory
    return factory

  return deco


def names() -> list[str]:
  """All registered algorithm names, sorted."""
  return sorted(_REGISTRY)


def hyperparameters(name: str) -> dict[str, object]:
  """The hyperparameters of ``name`` with their defaults (``inspect.Parameter.empty`` if none)."""
  sig = inspect.signature(_lookup(name))
  return {k: p.default for k, p in sig.parameters.items()}


def _lookup(name: str) -> Callable[..., Algorithm]:
  if name not in _REGISTRY:
    raise ValueError(f'unknown algorithm {name!r}; valid: {names()}.')
  return _REGISTRY[name]


def get(name: str, **hparams) -> Algorithm:
  """Build the algorithm ``name`` with the given hyperparameters.

  Raises:
    ValueError: unknown name, or a hyperparameter the algorithm does not take.
  """
  factory = _lookup(name)
  valid = hyperparameters(name)
  unknown = sorted(set(hparams) - set(valid))
  if unknown:
    raise ValueError(
      f'algorithm {name!r} has no hyperparameter(s) {unknown}; valid: {sorted(valid)}.'
    )
  return factory(**hparams)
