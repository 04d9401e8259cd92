"""What a script sets up for its process: the checkout its configs come from
(``$AFL_JAX_CHECKOUT``) and JAX's compilation cache (``$AFL_JAX_CACHE``); :class:`Scoped`."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Hashable, Iterator
from typing import Any

CHECKOUT_ENV = 'AFL_JAX_CHECKOUT'
CACHE_ENV = 'AFL_JAX_CACHE'
CACHE_DIR = '.jax_cache'


def use_checkout(script: str) -> str:
  """``$AFL_JAX_CHECKOUT``, set (unless set) to ``script``'s checkout, or the working directory
  when the script's parent has no ``configs/``."""
  if os.environ.get(CHECKOUT_ENV):
    return os.environ[CHECKOUT_ENV]
  root = os.path.dirname(os.path.dirname(os.path.abspath(script)))
  if not os.path.isdir(os.path.join(root, 'configs')):
    root = os.getcwd()
  os.environ[CHECKOUT_ENV] = root
  return root


def cache_dir(workdir: str) -> str:
  """``$AFL_JAX_CACHE``, else ``.jax_cache`` beside ``workdir``."""
  given = os.environ.get(CACHE_ENV)
  if given:
    return os.path.abspath(os.path.expanduser(given))
  parent = os.path.dirname(os.path.abspath(os.path.expanduser(workdir)))
  return os.path.join(parent, CACHE_DIR)


def use_compilation_cache(workdir: str) -> str:
  """Keep every compiled program in :func:`cache_dir` (before the first compile)."""
  import jax

  path = cache_dir(workdir)
  # A cache entry that cannot be written (a full disk) only costs a compile next time.
  warnings.filterwarnings('ignore', message='Error writing persistent compilation cache')
  jax.config.update('jax_compilation_cache_dir', path)
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)
  return path


class Scoped:
  """A memo kept only inside ``with memo.scope():`` (nested scopes share the outermost's)."""

  def __init__(self) -> None:
    self._kept: dict[Hashable, Any] | None = None

  @contextlib.contextmanager
  def scope(self) -> Iterator[None]:
    outer = self._kept
    self._kept = {} if outer is None else outer
    try:
      yield
    finally:
      self._kept = outer

  def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
    if self._kept is None:
      return compute()
    if key not in self._kept:
      self._kept[key] = compute()
    return self._kept[key]
