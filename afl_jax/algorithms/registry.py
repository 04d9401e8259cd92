"""Registry of algorithms by name: ``get('fedbuff', client_lr=0.01, server_lr=1.0)``.

Each algorithm family lives in its own module and registers a factory with
:func:`register`; the factory's keyword arguments are the algorithm's
hyperparameters (documented in docs/algorithms.md next to the paper's symbols),
plus, for some algorithms, facts about the run (the number of clients, the model's
``apply_fn``...). Those run-context arguments are declared at registration,
``@register('asynfl', context=('num_clients',))``, and filled from a
:class:`RunInfo` by ``get(name, run=info, **hparams)``: the run context reaches a
factory explicitly, never by inspecting its signature.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from afl_jax.core.types import Algorithm
from afl_jax.registry import Registry


@dataclasses.dataclass(frozen=True, eq=False)
class RunInfo:
  """Facts about a run that some algorithm factories need (all optional).

  Attributes:
    num_clients: N.
    arrivals_per_step: the schedule's largest number of arrivals per server step (S).
    local_steps: K, the median local step count over clients (an int).
    client_sizes: int[N] training examples per client (host NumPy).
    num_rounds: T, server steps of the run.
    apply_fn: the model's ``apply_fn(params, x) -> logits``.
    unlabeled_x: data no client owns, labels never read (FedEcho's server set).
  """

  num_clients: int | None = None
  arrivals_per_step: int | None = None
  local_steps: int | None = None
  client_sizes: np.ndarray | None = None
  num_rounds: int | None = None
  apply_fn: Callable[..., Any] | None = None
  unlabeled_x: Any = None


CONTEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunInfo))

ALGORITHMS = Registry('algorithm')


def register(
  name: str, context: Sequence[str] = ()
) -> Callable[[Callable[..., Algorithm]], Callable[..., Algorithm]]:
  """Decorator: register ``factory(**hparams, **context) -> Algorithm`` under ``name``.

  Args:
    name: the algorithm's name in configs.
    context: the :class:`RunInfo` fields the factory takes as keyword arguments.
  """
  context = tuple(context)
  unknown = sorted(set(context) - set(CONTEXT_FIELDS))
  if unknown:
    raise ValueError(
      f'algorithm {name!r}: context {unknown} are not RunInfo fields {CONTEXT_FIELDS}.'
    )
  return ALGORITHMS.register(name, context=context)


def names() -> list[str]:
  """All registered algorithm names, sorted."""
  return ALGORITHMS.names()


def context(name: str) -> tuple[str, ...]:
  """The :class:`RunInfo` fields algorithm ``name`` takes."""
  return ALGORITHMS.meta(name)['context']


def parameters(name: str) -> dict[str, object]:
  """Every keyword argument of ``name``'s factory with its default (hparams and context)."""
  sig = inspect.signature(ALGORITHMS.get(name))
  return {k: p.default for k, p in sig.parameters.items()}


def hyperparameters(name: str) -> dict[str, object]:
  """The hyperparameters of ``name`` with their defaults (``inspect.Parameter.empty`` if none).

  Run-context arguments (:func:`context`) are not hyperparameters and are left out.
  """
  ctx = set(context(name))
  return {k: v for k, v in parameters(name).items() if k not in ctx}


def get(name: str, run: RunInfo | None = None, **hparams) -> Algorithm:
  """Build the algorithm ``name`` with the given hyperparameters.

  Args:
    name: a registered name.
    run: fills the factory's declared context arguments not given in ``hparams``.
    **hparams: hyperparameters (and, optionally, context arguments given by hand).

  Raises:
    ValueError: unknown name, a hyperparameter the algorithm does not take, or a
      value the factory rejects.
  """
  factory = ALGORITHMS.get(name)
  ctx = context(name)
  valid = set(hyperparameters(name)) | set(ctx)
  unknown = sorted(set(hparams) - valid)
  if unknown:
    raise ValueError(
      f'algorithm {name!r} has no hyperparameter(s) {unknown}; '
      f'valid: {sorted(hyperparameters(name))}.'
    )
  kwargs = dict(hparams)
  if run is not None:
    for field in ctx:
      if field not in kwargs:
        kwargs[field] = getattr(run, field)
  return factory(**kwargs)
