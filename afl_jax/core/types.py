"""The seams of afl_jax: client rules, server rules, algorithms and what flows between them.

At server step ``t`` a set of clients *arrives*, each trained from the broadcast made before
server step ``s <= t`` (staleness ``tau = t - s``); the engine runs the arriving clients'
:class:`ClientRule` together under ``jax.vmap``, optionally compresses each message, and
hands the stacked messages to the :class:`ServerRule`. A plain client's message is the
pseudo-gradient ``Delta = x_start - x_local`` (FedOPT's convention, Reddi et al., 2021), so
a server moves ``x <- x - eta * mean(Delta)`` or feeds it to an optax transformation."""

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
  """Everything one client may see while it trains (built by the engine inside ``jax.vmap``,
  or by hand to call a :class:`ClientRule` directly).

  ``view``: this client's data or an index into ``shared`` (data of all clients);
  ``num_steps``: K_{t,i} (<= ``max_steps``, the static length of the local scan; steps
  ``k >= num_steps`` are masked); ``active``: the server will use the message;
  ``loss_fn(params, batch)`` and ``sample_fn(shared, view, key)`` are static. Inside a run:
  ``step`` (t, when the message arrives), ``start_step`` (s = t - staleness: MasFL's causal
  state reads it), ``loop_steps`` (a dynamic trip-count bound, the largest K of the block:
  it changes the work, never the result) and ``num_examples`` (for ``Algorithm.init``)."""

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
    """One mini-batch (or the full batch) of this client's data."""
    return self.sample_fn(self.shared, self.view, key)

  def batch_axes(self) -> LocalTask:
    """``in_axes`` for ``jax.vmap`` over a task batched on clients (``shared`` unbatched).

    Example: ``jax.vmap(rule.init, in_axes=(None, tasks.batch_axes(), 0))(params, tasks, keys)``.
    """
    return self.replace(
      view=0,
      shared=None,
      num_steps=0,
      active=0,
      client_id=0,
      step=None,
      start_step=None if self.start_step is None else 0,
      loop_steps=None,
      num_examples=None if self.num_examples is None else 0,
    )


class Arrivals(NamedTuple):
  """What the server knows about the messages of one server step (leading axis M).

  M is the engine's padded width: a rule uses only the rows where ``mask`` is True for
  counts, means and normalizers, never ``mask.shape[0]`` (padded rows hold finite messages,
  so a 0 weight removes them exactly). ``num_examples`` and ``total_examples`` let a server
  weight by data (:mod:`afl_jax.servers.weighting`); built by hand they may stay None."""

  client_ids: jax.Array  # int32[M]
  staleness: jax.Array  # int32[M], tau = t - start_step
  mask: jax.Array  # bool[M], False = padding / not reporting
  num_steps: jax.Array  # int32[M], K_{t,i}
  start_broadcast: Broadcast  # [M, ...] the broadcast each client started from
  step: jax.Array  # int32 scalar, server step t
  num_examples: Any = None  # int32[M], examples of each row's client (n_i)
  total_examples: Any = None  # int32 scalar, sum_{j=1}^{N} n_j


def unchanged_if_no_arrival(arrivals: Arrivals, new_state: Any, state: Any) -> Any:
  """The server-step contract: ``new_state`` if any arrival is valid, else ``state`` (no
  momentum, adaptive step or step count on an empty step)."""
  return tree.where(jnp.any(arrivals.mask), new_state, state)


class ClientRule(NamedTuple):
  """A local training rule for ONE client; the engine vmaps it.

  init(params, task, key) -> client_state          (per-client state; engine stacks N)
  update(start_broadcast, client_state, task, key) -> (message, client_state, metrics)
  """

  init: Callable[[Params, LocalTask, jax.Array], ClientState]
  update: Callable[
    [Broadcast, ClientState, LocalTask, jax.Array], tuple[Message, ClientState, Metrics]
  ]


def _params_field(state: ServerState) -> Params:
  return state.params


class ServerRule(NamedTuple):
  """A server rule, optax-style.

  init(params) -> server_state
  update(server_state, messages, arrivals, key) -> (server_state, metrics)
    ``messages`` is a pytree stacked over the M arrivals of this step.
  broadcast(server_state) -> what clients download (default: the params).
  params(server_state) -> the global model (default: ``state.params``).
  """

  init: Callable[[Params], ServerState]
  update: Callable[[ServerState, Message, Arrivals, jax.Array], tuple[ServerState, Metrics]]
  broadcast: Callable[[ServerState], Broadcast] = _params_field
  params: Callable[[ServerState], Params] = _params_field


class Algorithm(NamedTuple):
  """A named recipe: a client rule, a server rule and an optional compressor.

  ``regime``: 'per_job' (only the arriving clients compute, each from its start broadcast)
  or 'always_on' (every client trains every step on its own model; the schedule says who
  reports, AsynFL eq. 4). ``init(params, tasks, key) -> (server_state, client_states)``:
  an optional joint initializer (MasFL's c_i^0; ``tasks`` batched over all N clients).
  ``prepare(algorithm, schedule) -> Algorithm``: an optional host-side hook run once before
  compute (:func:`prepared`) that rejects a schedule the rule cannot honour or sizes
  schedule-dependent state; ``schedule`` may be a sweep's list, the result suiting all."""

  name: str
  client: ClientRule
  server: ServerRule
  compressor: Any = None
  regime: str = 'per_job'
  init: Callable[..., tuple[ServerState, ClientState]] | None = None
  prepare: Callable[[Algorithm, Any], Algorithm] | None = None


def prepared(algorithm: Algorithm, schedule: Any) -> Algorithm:
  """``algorithm`` specialized to ``schedule`` by its ``prepare`` hook, on the host (every
  entry point calls it first, so a schedule it cannot honour fails before compute)."""
  if algorithm.prepare is None:
    return algorithm
  out = algorithm.prepare(algorithm, schedule)
  return out._replace(prepare=None)
