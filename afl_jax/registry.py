"""One name -> factory mechanism, and the one validation, for every component a config names.

Algorithms, schedules (delay models), compressors, datasets and models are each a
:class:`Registry`. A factory's signature is the one source of truth for its settings:
its keyword arguments are the settings, their defaults the defaults, and the range of
each is declared beside it at registration, as a :class:`~afl_jax.core.checks.Spec`::

  @ALGORITHMS.register('fadas', server_lr=checks.real(0, low_open=True))
  def fadas(client_lr: float = 0.1, server_lr: float = 1e-4): ...

Keyword arguments of ``register`` that are Specs are ranges (each must name an argument
of the factory); the others are metadata (:meth:`Registry.meta`). A setting without a
declared range takes the registry's shared one (names that mean the same in every entry,
e.g. ``client_lr``), else the one its default implies (:func:`~afl_jax.core.checks.inferred`).
A range may be bounded by another setting or a run fact (``checks.integer(1, 'concurrency')``).

:meth:`Registry.bind` binds a config section to the factory: an unknown argument, a
value outside its range or a missing required argument raises one
:class:`~afl_jax.errors.ConfigError` naming ``config.<section>.<argument>``, the value and
the allowed range; the result is every setting the factory runs with (defaults filled).
Traced values (a sweep's hyperparameters inside the trace) and callables (optax
schedules) pass through unchecked.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from afl_jax import ranges as checks
from afl_jax.errors import ConfigError

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class Registry:
  """Names -> factories of one kind (``'algorithm'``, ``'compressor'``, ...).

  Args:
    kind: what an entry is, in messages.
    section: the config section holding an entry's settings (``'hparams'``,
      ``'schedule'``...); errors name ``config.<section>.<argument>``.
    name_field: the config field naming the entry (``'algorithm'``, ``'schedule.kind'``).
    supplied: arguments every factory of this kind receives from the caller (not
      settings), e.g. a model's ``num_classes``; an entry adds its own with ``context=``.
    shared: name -> Spec for settings that mean the same in every entry.

  Example::

    MODELS = Registry('model')

    @MODELS.register('mlp')
    def mlp(num_classes): ...

    MODELS.get('mlp')(10)
  """

  def __init__(
    self,
    kind: str,
    *,
    section: str | None = None,
    name_field: str | None = None,
    supplied: Sequence[str] = (),
    shared: Mapping[str, checks.Spec] | None = None,
  ):
    self.kind = kind
    self.section = section or kind
    self.name_field = name_field or kind
    self.supplied = tuple(supplied)
    self.shared = dict(shared or {})
    self._factories: dict[str, Callable[..., Any]] = {}
    self._meta: dict[str, dict[str, Any]] = {}
    self._specs: dict[str, dict[str, checks.Spec]] = {}
    self._context: dict[str, tuple[str, ...]] = {}

  def register(
    self,
    name: str,
    factory: Callable[..., Any] | None = None,
    *,
    replace: bool = False,
    context: Sequence[str] = (),
    **ranges_and_meta: Any,
  ):
    """Register ``factory`` under ``name`` (as a decorator when ``factory`` is omitted).

    ``context``: arguments the caller fills (facts about the run), not settings.
    Keyword arguments that are :class:`~afl_jax.core.checks.Spec` declare the range of
    the setting of that name; the others are stored as metadata (:meth:`meta`). A name
    registered twice is an error unless ``replace=True`` (a notebook cell run again).

    Raises:
      ValueError: a range for an argument the factory does not take as a setting.
    """
    specs = {k: v for k, v in ranges_and_meta.items() if isinstance(v, checks.Spec)}
    meta = {k: v for k, v in ranges_and_meta.items() if k not in specs}

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
      if name in self._factories and not replace:
        raise ValueError(
          f'{self.kind} {name!r} is registered twice; to replace the registered one '
          '(e.g. a notebook cell run again), pass replace=True to register.'
        )
      takes = _settings(f, self.supplied + tuple(context))
      stray = sorted(set(specs) - set(takes))
      if stray:
        raise ValueError(
          f'{self.kind} {name!r}: ranges {stray} are not settings of {_name(f)} '
          f'(its settings: {sorted(takes)}).'
        )
      self._factories[name] = f
      self._meta[name] = meta
      self._specs[name] = specs
      self._context[name] = tuple(context)
      return f

    return deco if factory is None else deco(factory)

  def unregister(self, name: str) -> None:
    """Remove ``name`` (e.g. a test's or notebook's own entry); unknown names: ValueError."""
    self.get(name)
    for table in (self._factories, self._meta, self._specs, self._context):
      table.pop(name)

  def get(self, name: str) -> Callable[..., Any]:
    """The factory registered as ``name``.

    Raises:
      ValueError: unknown name (the message lists the valid names).
    """
    if not isinstance(name, str) or name not in self._factories:
      raise ValueError(f'unknown {self.kind} name={name!r}; valid: {self.names()}.')
    return self._factories[name]

  def meta(self, name: str) -> dict[str, Any]:
    """The metadata given at registration (a copy)."""
    self.get(name)
    return dict(self._meta[name])

  def context(self, name: str) -> tuple[str, ...]:
    """The arguments of ``name``'s factory that the caller fills (not settings)."""
    self.get(name)
    return self._context[name]

  def settings(self, name: str) -> dict[str, Any]:
    """The settings of ``name`` with their defaults (``inspect.Parameter.empty``: required)."""
    return _settings(self.get(name), self.supplied + self._context[name])

  def defaults(self, name: str) -> dict[str, Any]:
    """The settings of ``name`` that have a default, with it."""
    return {k: v for k, v in self.settings(name).items() if v is not inspect.Parameter.empty}

  def specs(self, name: str) -> dict[str, checks.Spec | None]:
    """The range of each setting of ``name`` (None: unchecked): declared, shared or implied."""
    declared = self._specs[name] if name in self._specs else {}
    return {
      k: declared.get(k) or self.shared.get(k) or checks.inferred(d)
      for k, d in self.settings(name).items()
    }

  def violation(
    self, name: str, arg: str, value: Any, facts: Mapping[str, Any] | None = None
  ) -> str | None:
    """None when ``value`` is allowed for setting ``arg`` of ``name``, else what is.

    ``facts``: the values a range bounded by name reads (other settings, run facts).
    None is allowed where the default is None.
    """
    default = self.settings(name).get(arg, 0)
    if value is None and default is None:
      return None
    spec = self.specs(name).get(arg)
    if spec is None:
      return None
    return _bounded(spec, facts or {}).violation(value)

  def field(self, arg: str) -> str:
    """The config field of setting ``arg`` (``'hparams.client_lr'``)."""
    return f'{self.section}.{arg}'

  def bind(
    self,
    name: str,
    settings: Mapping[str, Any],
    *,
    facts: Mapping[str, Any] | None = None,
    in_config: bool = True,
  ) -> dict[str, Any]:
    """Every setting ``name``'s factory runs with: ``settings`` checked, defaults filled.

    Args:
      name: the registered name (from the config field :attr:`name_field`).
      settings: the section's values for this entry.
      facts: run facts a range may be bounded by (``num_clients``); the bound settings
        are added to them.
      in_config: errors read ``config.<section>.<arg>=...`` (else ``<section>.<arg>=...
        (<kind> 'name')``, for the Python API).

    Raises:
      ConfigError: unknown name, unknown argument (the valid ones listed), a value out
        of its range, or a required argument not given.
    """
    if name not in self:
      why = f'must be one of {self.names()} (the registered {self.kind}s).'
      raise self._error(self.name_field, name, why, name, in_config)
    takes = self.settings(name)
    context = set(self._context[name])
    for arg, value in settings.items():
      if arg not in takes and arg not in context:
        why = f'{self.kind} {name!r} takes no setting {arg!r}; valid: {sorted(takes)}.'
        raise self._error(self.field(arg), value, why, name, in_config)
    missing = [k for k, d in takes.items() if d is inspect.Parameter.empty and k not in settings]
    if missing:
      raise ConfigError(
        f'config.{self.field(missing[0])} is required by {self.kind} {name!r} (no default).',
        field=self.field(missing[0]),
      )
    out = {k: d for k, d in takes.items() if d is not inspect.Parameter.empty}
    out.update(settings)
    known = {**out, **(facts or {})}
    for arg, value in settings.items():
      if arg in context:
        continue
      problem = self.violation(name, arg, value, known)
      if problem is not None:
        raise self._error(self.field(arg), value, f'{problem}.', name, in_config)
    return out

  def _error(self, field: str, value: Any, why: str, name: str, in_config: bool) -> ConfigError:
    if in_config:
      return ConfigError.invalid(field, value, why)
    where = '' if f'{self.kind} {name!r}' in why else f' ({self.kind} {name!r})'
    return ConfigError(f'{field}={value!r} is invalid: {why.rstrip(".")}{where}.', field=field)

  def names(self) -> list[str]:
    """All registered names, sorted."""
    return sorted(self._factories)

  def __contains__(self, name: object) -> bool:
    return isinstance(name, str) and name in self._factories

  def __iter__(self) -> Iterator[str]:
    return iter(self.names())

  def __len__(self) -> int:
    return len(self._factories)


def _name(f: Callable[..., Any]) -> str:
  return getattr(f, '__name__', type(f).__name__)


def _settings(f: Callable[..., Any], supplied: Sequence[str]) -> dict[str, Any]:
  params = inspect.signature(f).parameters.values()
  return {
    p.name: p.default
    for p in params
    if p.kind not in _VARIADIC and p.name not in supplied and not p.name.startswith('_')
  }


def _bounded(spec: checks.Spec, facts: Mapping[str, Any]) -> checks.Spec:
  """``spec`` with a bound given by name replaced by that setting's (or fact's) value."""
  changes, notes = {}, []
  for end in ('low', 'high'):
    ref = getattr(spec, end)
    if isinstance(ref, str):
      value = facts.get(ref)
      if not isinstance(value, int | float) or isinstance(value, bool):
        changes[end] = -float('inf') if end == 'low' else float('inf')
        continue
      changes[end] = value
      notes.append(f'{ref}={value}')
  if not changes:
    return spec
  note = f' ({", ".join(notes)})' if notes else ''
  return dataclasses.replace(spec, **changes, note=spec.note + note)
