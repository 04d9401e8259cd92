"""Registry of algorithms by name: ``get('fedbuff', client_lr=0.01, server_lr=1.0)``.

Each algorithm family lives in its own module and registers a factory with
:func:`register`; the factory's keyword arguments are the algorithm's
hyperparameters (documented in docs/algorithms.md next to the paper's symbols),
plus, for some algorithms, facts about the run (the number of clients, the model's
``apply_fn``...). Those run-context arguments are declared at registration,
``@register('asynfl', context=('num_clients',))``, and filled from a
:class:`RunInfo` by ``get(name, run=info, **hparams)``: the run context reaches a
factory explicitly, never by inspecting its signature.

The range of each hyperparameter (a :class:`~afl_jax.ranges.Spec`) is declared beside
the factory at registration, ``@register('fedasync', alpha=checks.real(0, 1,
low_open=True))``; names that mean the same in every algorithm (``client_lr``,
``server_lr``, ``weighting``...) share one range (:data:`SHARED_SPECS`), and a
hyperparameter with neither is checked for the type of its default. ``ALGORITHMS``
is a :class:`~afl_jax.registry.Registry`: its ``bind`` is the one check behind
:func:`get` (``hparams.client_lr=-0.1 is invalid: must be > 0 (algorithm 'fedbuff')``),
every replica of ``afl_jax.sweep`` and a config's ``hparams``
(``config.hparams.client_lr=-0.1 is invalid: must be > 0.``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax

from afl_jax.core import checks
from afl_jax.core.types import Algorithm, ClientRule
from afl_jax.registry import Registry
from afl_jax.servers.weighting import WEIGHTINGS


@dataclasses.dataclass(frozen=True, eq=False)
class RunInfo:
  """Facts about a run that some algorithm factories need (all optional).

  Attributes:
    num_clients: N.
    arrivals_per_step: the schedule's largest number of arrivals per server step (S).
    local_steps: K, the median local step count over clients (an int).
    num_rounds: T, server steps of the run.
    apply_fn: the model's ``apply_fn(params, x) -> logits``.
    unlabeled_x: data no client owns, labels never read (FedEcho's server set).
  """

  num_clients: int | None = None
  arrivals_per_step: int | None = None
  local_steps: int | None = None
  num_rounds: int | None = None
  apply_fn: Callable[..., Any] | None = None
  unlabeled_x: Any = None


CONTEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunInfo))

# Hyperparameters that mean the same in every algorithm that takes them.
SHARED_SPECS: dict[str, checks.Spec] = {
  'client_lr': checks.POSITIVE,  # eta_l (an optax schedule is also accepted)
  'server_lr': checks.POSITIVE,  # eta_g
  'weighting': checks.choice(WEIGHTINGS),
  'mu': checks.NON_NEGATIVE,  # the proximal coefficient
  'beta1': checks.real(0.0, 1.0, high_open=True),  # first-moment decay
  'beta2': checks.real(0.0, 1.0, high_open=True),  # second-moment decay
  'epsilon': checks.POSITIVE,
}

ALGORITHMS = Registry('algorithm', section='hparams', name_field='algorithm', shared=SHARED_SPECS)


def register(
  name: str,
  context: Sequence[str] = (),
  *,
  replace: bool = False,
  **specs: checks.Spec,
) -> Callable[[Callable[..., Algorithm]], Callable[..., Algorithm]]:
  """Decorator: register ``factory(**hparams, **context) -> Algorithm`` under ``name``.

  ``ALGORITHMS.register`` with the run context checked against :class:`RunInfo`.

  Args:
    name: the algorithm's name in configs.
    context: the :class:`RunInfo` fields the factory takes as keyword arguments.
    **specs: the range of each hyperparameter (``alpha=checks.real(0, 1)``,
      ``checks.integer(1)``, ``checks.choice(...)``...) whose range is not in
      :data:`SHARED_SPECS` (or differs from it). A hyperparameter whose default is None
      also accepts None (the factory's own default rule).
    replace: replace an algorithm already registered as ``name`` (without it, a
      second registration is an error): re-running a notebook cell that defines
      and registers an algorithm needs ``replace=True``.
  """
  context = tuple(context)
  unknown = sorted(set(context) - set(CONTEXT_FIELDS))
  if unknown:
    raise ValueError(
      f'algorithm {name!r}: context {unknown} are not RunInfo fields {CONTEXT_FIELDS}.'
    )
  for k, spec in specs.items():
    if not isinstance(spec, checks.Spec):
      raise TypeError(
        f'algorithm {name!r}: the range of {k!r} must be a checks.Spec; got {spec!r}.'
      )
  return ALGORITHMS.register(name, context=context, replace=replace, **specs)


class Variant(NamedTuple):
  """One algorithm of a family registered by :func:`register_family`.

  Attributes:
    doc: the factory's docstring.
    omit: the family's keyword arguments this algorithm does not take.
    fixed: arguments of the family's ``build`` that this algorithm fixes.
    defaults: defaults that differ from the family's.
  """

  doc: str
  omit: tuple[str, ...] = ()
  fixed: Mapping[str, Any] = {}
  defaults: Mapping[str, Any] = {}


def register_family(
  build: Callable[..., Algorithm],
  params: Mapping[str, Any],
  variants: Mapping[str, Variant],
  *,
  context: Sequence[str] = (),
  specs: Mapping[str, checks.Spec] | None = None,
) -> dict[str, Callable[..., Algorithm]]:
  """Register the algorithms of one family, each as ``build(name, **fixed, **arguments)``.

  Each variant's factory takes the family's keyword arguments (``params``, in that
  order) less those it omits, with the family's defaults unless it sets its own; the
  family's ``context`` and ``specs`` apply to the arguments it takes.

  Args:
    build: ``build(name, **fixed, **arguments) -> Algorithm``.
    params: the family's keyword arguments with their defaults, in signature order.
    variants: name -> :class:`Variant`.
    context: the :class:`RunInfo` fields among ``params`` (see :func:`register`).
    specs: the ranges of the family's hyperparameters (see :func:`register`).

  Returns:
    name -> the registered factory.
  """
  factories = {}
  for name, variant in variants.items():
    takes = {k: variant.defaults.get(k, d) for k, d in params.items() if k not in variant.omit}
    factory = _variant_factory(build, name, takes, variant)
    factories[name] = register(
      name,
      context=[k for k in context if k in takes],
      **{k: spec for k, spec in (specs or {}).items() if k in takes},
    )(factory)
  return factories


def _variant_factory(
  build: Callable[..., Algorithm], name: str, takes: Mapping[str, Any], variant: Variant
) -> Callable[..., Algorithm]:
  kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
  sig = inspect.Signature([inspect.Parameter(k, kind, default=d) for k, d in takes.items()])

  def factory(*args, **kwargs) -> Algorithm:
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return build(name, **variant.fixed, **bound.arguments)

  factory.__signature__ = sig
  factory.__name__ = factory.__qualname__ = name
  factory.__doc__ = variant.doc
  factory.__module__ = build.__module__
  return factory


def joint_init(
  client: ClientRule, server_init: Callable[[Any, Any, Any], Any]
) -> Callable[..., tuple[Any, Any]]:
  """An ``Algorithm.init`` whose server state depends on every client (N from the tasks).

  Every client's state comes from one vmapped ``client.init`` over the N clients (a key
  each), then the server's from ``server_init(params, tasks, client_states)``; N is
  ``tasks.client_id.shape[0]``.
  """

  def init(params, tasks, key):
    keys = jax.random.split(key, tasks.client_id.shape[0])
    states = jax.vmap(client.init, in_axes=(None, tasks.batch_axes(), 0))(params, tasks, keys)
    return server_init(params, tasks, states), states

  return init


def names() -> list[str]:
  """All registered algorithm names, sorted."""
  return ALGORITHMS.names()


def context(name: str) -> tuple[str, ...]:
  """The :class:`RunInfo` fields algorithm ``name`` takes."""
  return ALGORITHMS.context(name)


def parameters(name: str) -> dict[str, object]:
  """Every keyword argument of ``name``'s factory with its default (hparams and context)."""
  sig = inspect.signature(ALGORITHMS.get(name))
  return {k: p.default for k, p in sig.parameters.items()}


def hyperparameters(name: str) -> dict[str, object]:
  """The hyperparameters of ``name`` with their defaults (``inspect.Parameter.empty`` if none).

  Run-context arguments (:func:`context`) are not hyperparameters and are left out.
  """
  return ALGORITHMS.settings(name)


def hyperparameter_specs(name: str) -> dict[str, checks.Spec | None]:
  """The range of each hyperparameter of ``name`` (None: not checked): declared at
  registration, else shared (:data:`SHARED_SPECS`), else implied by the default."""
  return ALGORITHMS.specs(name)


def get(name: str, run: RunInfo | None = None, **hparams) -> Algorithm:
  """Build the algorithm ``name`` with the given hyperparameters.

  Args:
    name: a registered name.
    run: fills the factory's declared context arguments not given in ``hparams``.
    **hparams: hyperparameters (and, optionally, context arguments given by hand).

  Raises:
    ConfigError: a hyperparameter the algorithm does not take (the message lists
      the valid ones), or a value outside its range (``ALGORITHMS.bind``), checked
      before the factory runs.
    ValueError: unknown name, or a combination of values the factory rejects.
  """
  factory = ALGORITHMS.get(name)
  kwargs = ALGORITHMS.bind(name, hparams, in_config=False)
  kwargs.update({k: v for k, v in hparams.items() if k in context(name)})
  if run is not None:
    for field in context(name):
      if field not in kwargs:
        kwargs[field] = getattr(run, field)
  return factory(**kwargs)
