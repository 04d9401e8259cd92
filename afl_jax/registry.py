"""One name -> factory mechanism, and the one validation, for every component a config names.

A factory's signature is the one truth for its settings; each setting's range is declared
beside it at registration (``@ALGORITHMS.register('fadas', tau_c=checks.integer(0))``) and
checked once by :meth:`Registry.bind`, for a config section and a direct call alike;
docs/extending.md."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from afl_jax import ranges
from afl_jax.errors import ArgumentError, ConfigError

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_EMPTY = inspect.Parameter.empty
# Bumped by every register/unregister: what a resolved config can depend on changed (caches of
# resolved configs, e.g. afl_jax.reproduction.runs.sweep_identity, key on it).
GENERATION = [0]


# Arguments that mean the same in every rule and algorithm that takes them.
COMMON: dict[str, ranges.Spec] = {
  'client_lr': ranges.POSITIVE,  # eta_l (an optax schedule is also accepted)
  'server_lr': ranges.POSITIVE,  # eta_g
  'weighting': ranges.choice(('uniform', 'examples')),  # servers._weighting
  'normalizer': ranges.choice(('arrivals', 'clients')),  # over |S_t| or n (AsynFL eq. 5)
  'mu': ranges.NON_NEGATIVE,  # the proximal coefficient
  'beta1': ranges.real(0.0, 1.0, high_open=True),  # first-moment decay
  'beta2': ranges.real(0.0, 1.0, high_open=True),  # second-moment decay
  'epsilon': ranges.POSITIVE,
  'num_clients': ranges.integer(1),
}


def validated(**specs: ranges.Spec | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
  """Decorator: the rule checks its arguments against ``specs`` (None: unchecked), else
  :data:`COMMON`, else the type of the default, when called; the result's ``specs`` are
  the declared and common ranges (what an algorithm built on it inherits)."""

  def deco(f):
    defaults = {k: p.default for k, p in inspect.signature(f).parameters.items()}
    stray = sorted(set(specs) - set(defaults))
    if stray:
      raise ValueError(f'{f.__name__}: ranges {stray} are not arguments.')
    table = {k: specs[k] if k in specs else COMMON.get(k) for k in defaults}
    where = f'{f.__module__.split(".")[1]}.{f.__name__}'

    def check(args):
      known = {k: d for k, d in defaults.items() if d is not inspect.Parameter.empty} | args
      for k, value in args.items():
        spec = table[k] if k in specs or table.get(k) else ranges.inferred(defaults.get(k))
        problem = ranges.violation(spec, value, defaults.get(k), known)
        if problem is not None:
          raise ArgumentError(f'{k}={value!r} is invalid: {problem} ({where}).')

    out = ranges.validating(f, check)
    out.specs = {k: s for k, s in table.items() if s is not None}
    return out

  return deco


class Registry:
  """Names -> factories of one ``kind``, whose settings live in config ``section`` and
  whose name in config field ``name_field``; ``supplied``: arguments every factory
  receives from the caller (not settings); ``shared``: name -> Spec for settings that
  mean the same in every entry."""

  def __init__(
    self,
    kind: str,
    *,
    section: str | None = None,
    name_field: str | None = None,
    supplied: Sequence[str] = (),
    shared: Mapping[str, ranges.Spec] | None = None,
  ):
    self.kind, self.section = kind, section or kind
    self.name_field = name_field or kind
    self.supplied = tuple(supplied)
    self.shared = dict(shared or {})
    self._entries: dict[str, tuple[Callable, dict, dict, tuple]] = {}

  def register(
    self,
    name: str,
    factory: Callable[..., Any] | None = None,
    *,
    replace: bool = False,
    context: Sequence[str] = (),
    uses: Sequence[Callable[..., Any]] = (),
    **ranges_and_meta: Any,
  ):
    """Register ``factory`` as ``name`` (a decorator when omitted); returns it checking its
    arguments when called. Spec keywords declare ranges, other keywords are metadata
    (:meth:`meta`); ``context``: run facts the caller fills; ``uses``: rules whose ranges
    apply to arguments of the same name; ``replace=True`` allows registering a name again."""
    declared = {k: v for k, v in ranges_and_meta.items() if isinstance(v, ranges.Spec)}
    meta = {k: v for k, v in ranges_and_meta.items() if k not in declared}

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
      if name in self._entries and not replace:
        raise ValueError(
          f'{self.kind} {name!r} is registered twice; to replace the registered one '
          '(e.g. a notebook cell run again), pass replace=True to register.'
        )
      takes = set(_settings(f, tuple(self.supplied))) - set(self.supplied)
      stray = sorted(set(declared) - takes)
      if stray:
        raise ValueError(f'{self.kind} {name!r}: ranges {stray} are not arguments of {f}.')
      inherited = {k: s for rule in uses for k, s in rule.specs.items() if k in takes}
      specs = {**inherited, **declared}
      out = run = f
      if inspect.isfunction(f):
        supplied = set(self.supplied)
        out = ranges.validating(
          f, lambda args: self._check(name, {k: v for k, v in args.items() if k not in supplied})
        )
        run = ranges.trusted(f)
      self._entries[name] = (run, meta, specs, tuple(context))
      GENERATION[0] += 1
      return out

    return deco if factory is None else deco(factory)

  def unregister(self, name: str) -> None:
    """Remove ``name`` (a test's or notebook's own entry); unknown names: ValueError."""
    self.get(name)
    del self._entries[name]
    GENERATION[0] += 1

  def get(self, name: str) -> Callable[..., Any]:
    """The factory registered as ``name``, for settings :meth:`bind` returned (it does not
    check them again; the function ``register`` returned does); unknown: ValueError."""
    if name not in self:
      raise ValueError(f'unknown {self.kind} name={name!r}; valid: {self.names()}.')
    return self._entries[name][0]

  def meta(self, name: str) -> dict[str, Any]:
    """The metadata given at registration (a copy)."""
    self.get(name)
    return dict(self._entries[name][1])

  def context(self, name: str) -> tuple[str, ...]:
    """The arguments of ``name``'s factory that the caller fills (not settings)."""
    self.get(name)
    return self._entries[name][3]

  def settings(self, name: str) -> dict[str, Any]:
    """The settings of ``name`` with their defaults (``inspect.Parameter.empty``: required)."""
    return dict(_settings(self.get(name), tuple(self.supplied) + tuple(self._entries[name][3])))

  def defaults(self, name: str) -> dict[str, Any]:
    """The settings of ``name`` that have a default, with it."""
    return {k: v for k, v in self.settings(name).items() if v is not _EMPTY}

  def specs(self, name: str) -> dict[str, ranges.Spec | None]:
    """The range of each setting of ``name`` (None: unchecked): declared, used, shared or
    implied by the default."""
    own = self._entries[name][2] if name in self else {}
    return {
      k: own.get(k) or self.shared.get(k) or ranges.inferred(d)
      for k, d in self.settings(name).items()
    }

  def violation(self, name: str, arg: str, value: Any, facts: Mapping[str, Any] | None = None):
    """None when ``value`` is allowed for setting ``arg`` of ``name``, else what is."""
    default = self.settings(name).get(arg, 0)
    return ranges.violation(self.specs(name).get(arg), value, default, facts or {})

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
    """Every setting ``name``'s factory runs with: ``settings`` checked (ranges may be bounded
    by ``facts`` such as ``num_clients``), defaults filled; ConfigError (``config.<section>.
    <arg>=...`` with ``in_config``) for an unknown name or argument, a value out of range or
    a required argument missing."""
    self._check(name, settings, facts, in_config)
    takes = self.settings(name)
    missing = [k for k, d in takes.items() if d is _EMPTY and k not in settings]
    if missing:
      field = self.field(missing[0])
      raise ConfigError(
        f'config.{field} is required by {self.kind} {name!r} (no default).', field=field
      )
    return {k: d for k, d in takes.items() if d is not _EMPTY} | dict(settings)

  def _check(self, name, settings, facts=None, in_config=False) -> None:
    if name not in self:
      why = f'must be one of {self.names()} (the registered {self.kind}s).'
      raise self._error(self.name_field, name, why, name, in_config)
    takes, context = self.settings(name), self._entries[name][3]
    for arg, value in settings.items():
      if arg not in takes and arg not in context:
        why = f'{self.kind} {name!r} takes no setting {arg!r}; valid: {sorted(takes)}.'
        raise self._error(self.field(arg), value, why, name, in_config)
    known = {**{k: d for k, d in takes.items() if d is not _EMPTY}, **settings, **(facts or {})}
    for arg, value in settings.items():
      if arg in context:  # a run fact given by hand: checked against its declared range
        problem = ranges.violation(self._entries[name][2].get(arg), value, None, known)
      else:
        problem = self.violation(name, arg, value, known)
      if problem is not None:
        raise self._error(self.field(arg), value, f'{problem}.', name, in_config)

  def _error(self, field: str, value: Any, why: str, name: str, in_config: bool) -> ConfigError:
    if in_config:
      return ConfigError.invalid(field, value, why)
    where = '' if f'{self.kind} {name!r}' in why else f' ({self.kind} {name!r})'
    return ConfigError(f'{field}={value!r} is invalid: {why.rstrip(".")}{where}.', field=field)

  def names(self) -> list[str]:
    """All registered names, sorted."""
    return sorted(self._entries)

  def __contains__(self, name: object) -> bool:
    return isinstance(name, str) and name in self._entries

  def __iter__(self) -> Iterator[str]:
    return iter(self.names())

  def __len__(self) -> int:
    return len(self._entries)


def _settings(f: Callable[..., Any], supplied: Sequence[str]) -> dict[str, Any]:
  try:  # a signature is fixed per function object (callers copy the result out)
    return _cached_settings(f, tuple(supplied))
  except TypeError:  # an unhashable callable: read its signature each time
    return _read_settings(f, supplied)


def _read_settings(f: Callable[..., Any], supplied: Sequence[str]) -> dict[str, Any]:
  params = inspect.signature(f).parameters.values()
  return {
    p.name: p.default
    for p in params
    if p.kind not in _VARIADIC and p.name not in supplied and not p.name.startswith('_')
  }


_cached_settings = functools.lru_cache(maxsize=4096)(_read_settings)
