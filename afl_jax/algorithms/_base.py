"""The registries of the rules (``CLIENTS``, ``SERVERS``) and of the algorithms built from them
(``ALGORITHMS``: a config's ``algorithm`` and ``hparams``), and the run facts some factories
take (:class:`RunInfo`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from afl_jax import checks
from afl_jax.core.types import ClientRule
from afl_jax.registry import Registry


@dataclasses.dataclass(frozen=True, eq=False)
class RunInfo:
  """Run facts some factories take: N, the widest step S, the median K, T, the model's
  ``apply_fn`` and the unlabeled inputs."""

  num_clients: int | None = None
  arrivals_per_step: int | None = None
  local_steps: int | None = None
  num_rounds: int | None = None
  apply_fn: Callable[..., Any] | None = None
  unlabeled_x: Any = None


CONTEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunInfo))
CLIENTS = Registry('client', shared=checks.COMMON)
SERVERS = Registry('server', shared=checks.COMMON)
ALGORITHMS = Registry(
  'algorithm', section='hparams', name_field='algorithm', shared=checks.COMMON, facts=CONTEXT_FIELDS
)


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
