"""The seams: client rules, server rules, algorithms and what flows between them. A plain
client's message is the pseudo-gradient ``x_start - x_local`` (FedOPT's convention, Reddi et al.,
2021); docs/architecture.md, "Seams"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from afl_jax.core import tree

Params = Any
Broadcast = Any
Message = Any
ClientState = Any
ServerState = Any
Metrics = dict[str, jax.Array]


class EmptyState(NamedTuple):
  """State of a rule that keeps none."""


@struct.dataclass
class LocalTask:
  """What one client sees while it trains. ``view``: its data or an index into ``shared``;
  ``num_steps``: K_{t,i} (<= the static ``max_steps``; later steps masked); ``active``: the
  server uses the message. In a run: ``step`` (t), ``start_step`` (t - staleness),
  ``loop_steps`` (a trip-count bound that changes the work, never the result) and
  ``num_examples`` (for ``Algorithm.init``)."""

  view: Any
  shared: Any
  num_steps: jax.Array
  active: jax.Array
  client_id: jax.Array
  loss_fn: Callable[..., jax.Array] = struct.field(pytree_node=False)
  sample_fn: Callable[..., Any] = struct.field(pytree_node=False)
  max_steps: int = struct.field(pytree_node=False)
  step: Any = None
  start_step: Any = None
  loop_steps: Any = None
  num_examples: Any = None

  def sample(self, key: jax.Array) -> Any:
    return self.sample_fn(self.shared, self.view, key)

  def batch_axes(self) -> LocalTask:
    """``in_axes`` for ``jax.vmap`` over a task batched on clients (``shared`` unbatched)."""
    some = lambda x: None if x is None else 0
    return self.replace(
      view=0, shared=None, num_steps=0, active=0, client_id=0, step=None, loop_steps=None,
      start_step=some(self.start_step), num_examples=some(self.num_examples),
    )  # fmt: skip


class Arrivals(NamedTuple):
  """What the server knows about one step's messages (leading axis M, padded: count only rows
  where ``mask`` is True, never ``mask.shape[0]``; padded rows are finite, so weight 0 removes
  them exactly)."""

  client_ids: jax.Array  # int32[M]
  staleness: jax.Array  # int32[M], tau = t - start_step
  mask: jax.Array  # bool[M], False = padding / not reporting
  num_steps: jax.Array  # int32[M], K_{t,i}
  start_broadcast: Broadcast  # [M, ...] the broadcast each client started from
  step: jax.Array  # int32 scalar, server step t
  num_examples: Any = None  # int32[M], examples of each row's client (n_i)
  total_examples: Any = None  # int32 scalar, sum_{j=1}^{N} n_j


def unchanged_if_no_arrival(arrivals: Arrivals, new_state: Any, state: Any) -> Any:
  """The empty-step contract: ``new_state`` if any arrival is valid, else ``state``."""
  return tree.where(jnp.any(arrivals.mask), new_state, state)


class ClientRule(NamedTuple):
  """ONE client's local rule (the engine vmaps it): ``init(params, task, key) -> state``;
  ``update(start_broadcast, state, task, key) -> (message, state, metrics)``."""

  init: Callable[[Params, LocalTask, jax.Array], ClientState]
  update: Callable[
    [Broadcast, ClientState, LocalTask, jax.Array], tuple[Message, ClientState, Metrics]
  ]


def _params_field(state: ServerState) -> Params:
  return state.params


class ServerRule(NamedTuple):
  """A server rule, optax-style: ``init(params)``; ``update(state, messages [M, ...], arrivals,
  key) -> (state, metrics)``; ``broadcast(state)``: what clients download and ``params(state)``:
  the global model (both default ``state.params``)."""

  init: Callable[[Params], ServerState]
  update: Callable[[ServerState, Message, Arrivals, jax.Array], tuple[ServerState, Metrics]]
  broadcast: Callable[[ServerState], Broadcast] = _params_field
  params: Callable[[ServerState], Params] = _params_field


class Algorithm(NamedTuple):
  """A client rule, a server rule and an optional compressor. ``regime``: 'per_job' (arriving
  clients compute from their start broadcast) or 'always_on' (every client trains every step,
  AsynFL eq. 4). ``init(params, tasks, key) -> (server_state, client_states)``: an optional
  joint initializer (MasFL's c_i^0). ``prepare(algorithm, schedule(s)) -> Algorithm``: an
  optional host hook run before compute that refuses a schedule or sizes state by it."""

  name: str
  client: ClientRule
  server: ServerRule
  compressor: Any = None
  regime: str = 'per_job'
  init: Callable[..., tuple[ServerState, ClientState]] | None = None
  prepare: Callable[[Algorithm, Any], Algorithm] | None = None


def prepared(algorithm: Algorithm, schedule: Any) -> Algorithm:
  """``algorithm`` specialized to ``schedule`` by its ``prepare`` hook, on the host."""
  if algorithm.prepare is None:
    return algorithm
  out = algorithm.prepare(algorithm, schedule)
  return out._replace(prepare=None)
