"""Algorithms by name: ``get('fedbuff', client_lr=0.01, server_lr=1.0)``.

``ALGORITHMS`` is a :class:`~afl_jax.registry.Registry`: a factory's keyword arguments
are the algorithm's hyperparameters (documented in docs/algorithms/), plus the run facts
it declares as ``context`` and receives from a :class:`RunInfo`. Their ranges are
declared at registration, inherited from the rules it names in ``uses``, or shared
(:data:`afl_jax.core.checks.COMMON`); ``bind`` checks them for :func:`get`, every
replica of ``afl_jax.sweep``, a config's ``hparams`` and a direct call of the factory.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax

from afl_jax.core import checks
from afl_jax.core.types import Algorithm, ClientRule
from afl_jax.registry import Registry


@dataclasses.dataclass(frozen=True, eq=False)
class RunInfo:
  """Facts about a run that some algorithm factories need (all optional): N, the
  schedule's largest arrivals per step S, the median local steps K, the server steps T,
  the model's ``apply_fn(params, x) -> logits`` and the unlabeled inputs no client owns."""

  num_clients: int | None = None
  arrivals_per_step: int | None = None
  local_steps: int | None = None
  num_rounds: int | None = None
  apply_fn: Callable[..., Any] | None = None
  unlabeled_x: Any = None


CONTEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunInfo))
SHARED_SPECS = checks.COMMON
ALGORITHMS = Registry('algorithm', section='hparams', name_field='algorithm', shared=SHARED_SPECS)


def register(
  name: str,
  context: Sequence[str] = (),
  *,
  uses: Sequence[Callable[..., Any]] = (),
  replace: bool = False,
  **specs: checks.Spec,
) -> Callable[[Callable[..., Algorithm]], Callable[..., Algorithm]]:
  """Decorator: register ``factory(**hparams, **context) -> Algorithm`` as ``name``.

  ``context``: the :class:`RunInfo` fields it takes; ``uses``: the rules whose ranges its
  hyperparameters of the same name take; ``specs``: the other ranges
  (``alpha=checks.real(0, 1)``); ``replace``: re-register a name (a notebook cell).
  """
  unknown = sorted(set(context) - set(CONTEXT_FIELDS))
  if unknown:
    raise ValueError(f'algorithm {name!r}: context {unknown} are not RunInfo fields.')
  for k, spec in specs.items():
    if not isinstance(spec, checks.Spec):
      raise TypeError(
        f'algorithm {name!r}: the range of {k!r} must be a checks.Spec; got {spec!r}.'
      )
  return ALGORITHMS.register(name, context=tuple(context), uses=uses, replace=replace, **specs)


def joint_init(
  client: ClientRule, server_init: Callable[[Any, Any, Any], Any]
) -> Callable[..., tuple[Any, Any]]:
  """An ``Algorithm.init`` whose server state depends on every client: the N client
  states from one vmapped ``client.init``, then ``server_init(params, tasks, states)``."""

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
  return {k: p.default for k, p in inspect.signature(ALGORITHMS.get(name)).parameters.items()}


def hyperparameters(name: str) -> dict[str, object]:
  """The hyperparameters of ``name`` (not its context) with their defaults."""
  return ALGORITHMS.settings(name)


def hyperparameter_specs(name: str) -> dict[str, checks.Spec | None]:
  """The range of each hyperparameter of ``name`` (None: not checked)."""
  return ALGORITHMS.specs(name)


def get(name: str, run: RunInfo | None = None, **hparams) -> Algorithm:
  """The algorithm ``name`` with ``hparams`` (checked: ``ConfigError`` naming the one out
  of range or unknown), its context arguments not given filled from ``run``."""
  factory = ALGORITHMS.get(name)
  if run is not None:
    hparams = {f: getattr(run, f) for f in context(name)} | hparams
  return factory(**ALGORITHMS.bind(name, hparams, in_config=False))
