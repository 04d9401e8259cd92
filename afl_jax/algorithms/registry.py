"""The algorithm registry: a factory's keyword arguments are its hyperparameters plus the
:class:`RunInfo` facts it declares as ``context`` (:mod:`afl_jax.registry`)."""

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
  """Run facts some factories take: N, the widest step S, the median K, T, the model's ``apply_fn``
  and the unlabeled inputs."""

  num_clients: int | None = None
  arrivals_per_step: int | None = None
  local_steps: int | None = None
  num_rounds: int | None = None
  apply_fn: Callable[..., Any] | None = None
  unlabeled_x: Any = None


CONTEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunInfo))
ALGORITHMS = Registry('algorithm', section='hparams', name_field='algorithm', shared=checks.COMMON)


def register(
  name: str,
  context: Sequence[str] = (),
  *,
  uses: Sequence[Callable[..., Any]] = (),
  replace: bool = False,
  **specs: checks.Spec,
) -> Callable[[Callable[..., Algorithm]], Callable[..., Algorithm]]:
  """Decorator: register ``factory(**hparams, **context) -> Algorithm`` as ``name``."""
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
  """An ``Algorithm.init`` from one vmapped ``client.init`` over the N clients, then
  ``server_init(params, tasks, states)``."""

  def init(params, tasks, key):
    keys = jax.random.split(key, tasks.client_id.shape[0])
    states = jax.vmap(client.init, in_axes=(None, tasks.batch_axes(), 0))(params, tasks, keys)
    return server_init(params, tasks, states), states

  return init


def names() -> list[str]:
  return ALGORITHMS.names()


def context(name: str) -> tuple[str, ...]:
  return ALGORITHMS.context(name)


def parameters(name: str) -> dict[str, object]:
  """Every keyword argument of ``name``'s factory with its default (hparams and context)."""
  return {k: p.default for k, p in inspect.signature(ALGORITHMS.get(name)).parameters.items()}


def hyperparameters(name: str) -> dict[str, object]:
  return ALGORITHMS.settings(name)


def hyperparameter_specs(name: str) -> dict[str, checks.Spec | None]:
  return ALGORITHMS.specs(name)


def get(name: str, run: RunInfo | None = None, **hparams) -> Algorithm:
  """The algorithm ``name`` with ``hparams`` checked, its context filled from ``run``."""
  factory = ALGORITHMS.get(name)
  if run is not None:
    hparams = {f: getattr(run, f) for f in context(name)} | hparams
  return factory(**ALGORITHMS.bind(name, hparams, in_config=False))
