"""One name -> factory mechanism for algorithms, compressors, models, datasets and schedules.

A :class:`Registry` maps names to factories (with optional metadata, e.g. the run
context an algorithm factory takes); ``get`` of an unknown name raises one
``ValueError`` that lists the valid names, so a config error reads the same for
every kind of thing a config can name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


class Registry:
  """Names -> factories of one kind (``'algorithm'``, ``'compressor'``, ...).

  Example::

    MODELS = Registry('model')

    @MODELS.register('mlp')
    def mlp(num_classes): ...

    MODELS.get('mlp')(10)
  """

  def __init__(self, kind: str):
    self.kind = kind
    self._factories: dict[str, Callable[..., Any]] = {}
    self._meta: dict[str, dict[str, Any]] = {}

  def register(
    self,
    name: str,
    factory: Callable[..., Any] | None = None,
    *,
    replace: bool = False,
    **meta: Any,
  ):
    """Register ``factory`` under ``name`` (as a decorator when ``factory`` is omitted).

    ``meta`` is stored with the entry (:meth:`meta`). A name registered twice is an
    error (two modules claiming one name is a bug, not a user choice) unless
    ``replace=True``: then the new factory and metadata take the name's place, e.g.
    when a notebook cell that defines and registers a factory runs again.
    """

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
      if name in self._factories and not replace:
        raise ValueError(
          f'{self.kind} {name!r} is registered twice; to replace the registered one '
          '(e.g. a notebook cell run again), pass replace=True to register.'
        )
      self._factories[name] = f
      self._meta[name] = dict(meta)
      return f

    return deco if factory is None else deco(factory)

  def get(self, name: str) -> Callable[..., Any]:
    """The factory registered as ``name``.

    Raises:
      ValueError: unknown name (the message lists the valid names).
    """
    if name not in self._factories:
      raise ValueError(f'unknown {self.kind} name={name!r}; valid: {self.names()}.')
    return self._factories[name]

  def meta(self, name: str) -> dict[str, Any]:
    """The metadata given at registration (a copy)."""
    self.get(name)
    return dict(self._meta[name])

  def names(self) -> list[str]:
    """All registered names, sorted."""
    return sorted(self._factories)

  def __contains__(self, name: object) -> bool:
    return name in self._factories

  def __iter__(self) -> Iterator[str]:
    return iter(self.names())

  def __len__(self) -> int:
    return len(self._factories)
