"""Name -> factory registries of every component kind and the one check of their settings:
``make(name, **settings)``, ``names()``, ``settings(name)`` (docs/extending.md)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from afl_jax import checks
from afl_jax.errors import ArgumentError, ConfigError

REQUIRED = inspect.Parameter.empty  # the default of a setting that has none
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
GENERATION = [0]  # bumped by every (un)register: caches of resolved configs key on it


@dataclasses.dataclass(frozen=True)
class _Entry:
  factory: Callable[..., Any]
  settings: dict[str, Any]  # setting -> default (REQUIRED: none)
  specs: dict[str, checks.Spec]  # declared, then inherited from the rules it uses
  rules: tuple[checks.Rule, ...]
  context: tuple[str, ...]  # arguments the caller fills from run facts (not settings)
  needs: tuple[str, ...]  # the context arguments without a default
  fixed: dict[str, Any]  # arguments this registration sets (not settings)
  parts: dict[str, tuple[Registry, str]]  # argument -> the entry that builds it
  meta: dict[str, Any]
  public: Callable[..., Any]  # the factory as a user calls it (:meth:`exports`)


class Registry:
  """Names -> factories of one ``kind``; ``section``: the config section named by a refusal
  (None: an ArgumentError); ``supplied``: arguments the caller gives every factory; ``shared``:
  specs common to all entries; ``parts``: argument -> factory building it from the settings;
  ``facts``: the run facts an entry may take as ``context`` (None: any)."""

  def __init__(
    self,
    kind: str,
    *,
    section: str | None = None,
    name_field: str | None = None,
    supplied: Sequence[str] = (),
    shared: Mapping[str, checks.Spec] | None = None,
    parts: Mapping[str, Callable[..., Any]] | None = None,
    facts: Sequence[str] | None = None,
  ):
    self.kind, self.section, self.name_field = kind, section, name_field or kind
    self.supplied, self.shared = tuple(supplied), dict(shared or {})
    self.parts = {arg: f.__registered__ for arg, f in (parts or {}).items()}
    self.facts = None if facts is None else tuple(facts)
    self._entries: dict[str, _Entry] = {}

  def register(
    self,
    name: str,
    factory: Callable[..., Any] | None = None,
    /,
    *,
    replace: bool = False,
    context: Sequence[str] = (),
    uses: Sequence[Callable[..., Any]] = (),
    fixed: Mapping[str, Any] | None = None,
    rules: Sequence[checks.Rule] = (),
    **specs_and_meta: Any,
  ):
    """Register ``factory`` as ``name`` (a decorator when omitted); returns it checking its
    arguments. Spec keywords are ranges, others metadata; ``uses``: registered rules whose specs
    and rules apply (their settings pass through ``**kwargs``); ``fixed``: arguments set here."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
      if name in self._entries and not replace:
        raise ValueError(
          f'{self.kind} {name!r} is registered twice; to replace the registered one '
          '(e.g. a notebook cell run again), pass replace=True to register.'
        )
      self._entries[name] = self._entry_of(name, f, context, fixed, uses, rules, specs_and_meta)
      GENERATION[0] += 1
      return self._entries[name].public

    return deco if factory is None else deco(factory)

  def _entry_of(self, name, f, context, fixed, uses, rules, specs_and_meta) -> _Entry:
    declared = {k: v for k, v in specs_and_meta.items() if isinstance(v, checks.Spec)}
    meta = {k: v for k, v in specs_and_meta.items() if k not in declared}
    context, fixed, sig = tuple(context), dict(fixed or {}), inspect.signature(f)
    params = sig.parameters.values()
    skip = set(self.supplied) | set(context) | set(fixed)
    own = [p for p in params if p.name not in skip and not p.name.startswith('_')]
    parts = {p.name: self.parts[p.name] for p in own if p.name in self.parts}
    settings = {p.name: p.default for p in own if p.kind not in _VARIADIC and p.name not in parts}
    used = [u.__registered__ for u in uses]
    if any(p.kind == p.VAR_KEYWORD for p in own):  # passes the rules' settings on
      for registry, rule in used:
        takes = registry.settings(rule).items()
        settings |= {k: d for k, d in takes if k not in skip | settings.keys()}
    for registry, part in parts.values():
      settings |= registry.settings(part)
    reserved = {'replace', 'context', 'uses', 'fixed', 'rules', 'facts', 'name'}
    reserved.add(self.name_field.rsplit('.', 1)[-1])  # the key naming the component
    if set(settings) & reserved:
      clash = sorted(set(settings) & reserved)[0]
      raise ValueError(f'{self.kind} {name!r}: setting {clash!r} is reserved; rename it.')
    stray = sorted(set(declared) - set(settings) - set(context))
    if stray:
      raise ValueError(f'{self.kind} {name!r}: ranges {stray} are not arguments.')
    for k in set(meta) & (set(settings) | set(context)):
      raise TypeError(f'{self.kind} {name!r}: the range of {k!r} must be a checks.Spec.')
    unknown = sorted(set(context) - set(self.facts or context))
    if unknown:
      raise ValueError(f'{self.kind} {name!r}: context {unknown} are not run facts {self.facts}.')
    known = set(settings) | set(context) | set(fixed)
    specs, inherited = dict(declared), list(rules)
    for registry, rule in [*used, *parts.values()]:
      entry = registry._entries[rule]
      specs |= {k: s for k, s in entry.specs.items() if k in known and k not in specs}
      inherited += [r for r in entry.rules if set(r.reads) <= known and r not in inherited]
    needs = tuple(p.name for p in params if p.name in context and p.default is REQUIRED)
    positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    positional = [k for k in positional if k not in fixed]

    @functools.wraps(f, updated=())
    def public(*args, **kwargs):  # ``f`` as a user calls it: its arguments checked, then built
      if len(args) > len(positional):
        raise TypeError(f'{name}() takes {len(positional)} positional arguments.')
      return self.make(name, **dict(zip(positional, args, strict=False)), **kwargs)

    public.__name__ = public.__qualname__ = name
    public.__registered__ = (self, name)
    if fixed:
      public.__signature__ = sig.replace(parameters=[p for p in params if p.name not in fixed])
    entry = (f, settings, specs, tuple(inherited), context, needs, fixed, parts, meta, public)
    return _Entry(*entry)

  def unregister(self, name: str) -> None:
    self._entry(name)
    del self._entries[name]
    GENERATION[0] += 1

  def make(self, name: str, /, facts: Any = None, **kwargs: Any) -> Any:
    """The component ``name`` built with ``kwargs`` checked by :meth:`bind`; ``context`` not
    given is read from ``facts`` (a mapping or an object such as a RunInfo)."""
    entry, facts = self._entry(name), _as_mapping(facts)
    supplied = {k: kwargs.pop(k) for k in list(kwargs) if k in self.supplied}
    kwargs = {k: facts[k] for k in entry.context if k not in kwargs and k in facts} | kwargs
    bound = self.bind(name, kwargs, facts=facts, in_config=False)
    missing = [k for k in entry.needs if k not in kwargs]
    if missing:  # a config section never holds run facts: only a build needs them
      why = f'is a run fact {self.kind} {name!r} needs: give it (or facts=RunInfo(...))'
      raise self._error(missing[0], REQUIRED, why, name, False)
    for arg, (registry, part) in entry.parts.items():
      takes = registry.settings(part)
      given = {k: bound.pop(k) for k in list(bound) if k in takes}
      own = {k: v for k, v in supplied.items() if k in registry.supplied}
      supplied[arg] = registry.make(part, **own, **given)
    return entry.factory(**supplied, **entry.fixed, **bound)

  def verbs(self) -> tuple[Callable, Callable, Callable, Callable]:
    return self.make, self.names, self.settings, self.register

  def exports(self) -> dict[str, Callable[..., Any]]:
    return {name: entry.public for name, entry in sorted(self._entries.items())}

  def names(self) -> list[str]:
    return sorted(self._entries)

  def settings(self, name: str) -> dict[str, Any]:
    return dict(self._entry(name).settings)

  def defaults(self, name: str) -> dict[str, Any]:
    return {k: v for k, v in self.settings(name).items() if v is not REQUIRED}

  def specs(self, name: str) -> dict[str, checks.Spec | None]:
    """The range of each setting (None: unchecked)."""
    entry = self._entry(name)
    return {k: self._spec(entry, k) for k in entry.settings}

  def _spec(self, entry: _Entry, arg: str) -> checks.Spec | None:
    found = entry.specs.get(arg) or self.shared.get(arg)
    if arg in entry.context:  # a run fact given by hand: its declared or shared range
      return found
    return found or checks.inferred(entry.settings.get(arg))

  def meta(self, name: str) -> dict[str, Any]:
    return dict(self._entry(name).meta)

  def context(self, name: str) -> tuple[str, ...]:
    return self._entry(name).context

  def factory(self, name: str) -> Callable[..., Any]:
    return self._entry(name).factory

  def _field(self, arg: str) -> str:
    return f'{self.section}.{arg}' if self.section else arg

  def violation(self, name: str, arg: str, value: Any, facts: Mapping[str, Any] | None = None):
    entry = self._entry(name)
    known = {**self.defaults(name), **(facts or {})}
    return checks.violation(self._spec(entry, arg), value, entry.settings.get(arg), known)

  def bind(
    self, name: str, settings: Mapping[str, Any], *, facts: Any = None, in_config: bool = True
  ) -> dict[str, Any]:
    """``settings`` checked (ranges bounded by ``facts``, then the rules), defaults filled, lists
    as tuples; else the one refusal."""
    refusal = self.refusal(name, settings, _as_mapping(facts))
    if refusal is not None:
      raise self._error(*refusal, name, in_config)
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
    return self.defaults(name) | given

  def refusal(
    self, name: str, settings: Mapping[str, Any], facts: Mapping[str, Any] | None = None
  ) -> tuple[str, Any, str] | None:
    """None when ``settings`` suit ``name``, else the first ``(field, value, why)``."""
    if name not in self:
      return self.name_field, name, f'must be one of {self.names()} (the registered {self.kind}s).'
    entry = self._entries[name]
    for arg, value in settings.items():
      if arg not in entry.settings and arg not in entry.context:
        why = f'{self.kind} {name!r} takes no setting {arg!r}; valid: {sorted(entry.settings)}.'
        return self._field(arg), value, why
    known = self.defaults(name) | {k: v for k, v in (facts or {}).items() if v is not None}
    known |= dict(settings)
    for arg, value in settings.items():
      problem = checks.violation(self._spec(entry, arg), value, entry.settings.get(arg), known)
      if problem is not None:
        return self._field(arg), value, f'{problem}.'
    missing = [k for k, d in entry.settings.items() if d is REQUIRED and k not in settings]
    if missing:
      return self._field(missing[0]), REQUIRED, f'is required by {self.kind} {name!r} (no default)'
    known |= entry.fixed
    for rule in entry.rules:
      if all(k in known and not checks.is_traced(known[k]) for k in rule.reads):
        problem = rule.problem(**{k: known[k] for k in rule.reads})
        if isinstance(problem, tuple):
          return problem
        if problem is not None:
          return self._field(rule.field), known.get(rule.field), f'{problem}.'
    return None

  def _entry(self, name: str) -> _Entry:
    if name not in self:
      why = f'unknown {self.kind} name={name!r}; valid: {self.names()}.'
      raise ConfigError(why, field=self.name_field) if self.section else ArgumentError(why)
    return self._entries[name]

  def _error(self, field: str, value: Any, why: str, name: str, in_config: bool):
    if value is REQUIRED:
      message = f'{field} {why}.'
      return ConfigError(f'config.{message}' if in_config else message, field=field)
    if hasattr(value, 'dtype') and np.ndim(value) > 0:  # an array as its dtype and shape
      value = _Shown(f'{np.dtype(value.dtype).name}{list(np.shape(value))}')
    if in_config:
      return ConfigError.invalid(field, value, why.rstrip('.') + '.')
    owner = f'{self.kind} {name!r}'
    where = '' if owner in why else f' ({owner})'
    message = f'{field}={value!r} is invalid: {why.rstrip(".")}{where}.'
    return ConfigError(message, field=field) if self.section else ArgumentError(message)

  def __contains__(self, name: object) -> bool:
    return isinstance(name, str) and name in self._entries

  def __iter__(self) -> Iterator[str]:
    return iter(self.names())

  def __len__(self) -> int:
    return len(self._entries)


class _Shown(str):
  """An array as an error names it: ``float32[9, 2]``."""

  __repr__ = str.__str__


def _as_mapping(facts: Any) -> dict[str, Any]:
  items = {} if facts is None else facts if isinstance(facts, Mapping) else vars(facts)
  return {k: v for k, v in items.items() if v is not None}
