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
  """Everything one client may see while it trains: its data, its step budget.

  Built by the engine for each arriving client inside ``jax.vmap``; a library user
  builds one by hand to call a :class:`ClientRule` directly.

  Attributes:
    view: this client's data, or an index into ``shared`` (a pytree).
    shared: data shared by all clients (e.g. one flat array of every sample).
    num_steps: int32 scalar, K_{t,i}: local steps this job runs (<= max_steps).
    active: bool scalar, True when the server will use this client's message
      (False for padding, or for an always-on client that does not report now).
    client_id: int32 scalar.
    loss_fn: ``loss_fn(params, batch) -> scalar`` (static).
    sample_fn: ``sample_fn(shared, view, key) -> batch`` (static).
    max_steps: the static length of the local ``lax.scan``; steps at index
      ``k >= num_steps`` are masked out.
    step: int32 scalar, the server step t at which this job's message arrives
      (None when the task is built outside a run, e.g. for ``ClientRule.init``).
    start_step: int32 scalar, the server version s the job started from
      (``t - staleness``; None outside a run). A rule whose client state must be
      causal (MasFL's c~_i, :mod:`afl_jax.clients.masfl`) reads it.
    loop_steps: int32 scalar or None, a dynamic bound on the local loop's trip
      count: the largest K among the clients trained together (the engine sets it
      when it groups a step's arrivals by K; ``<= max_steps``). None: the loop runs
      ``max_steps`` iterations. Steps ``k >= num_steps`` are masked either way, so it
      changes the work done, never the result (:func:`afl_jax.clients.run_local_steps`).
    num_examples: int32 scalar or None, this client's number of training examples
      (the engine fills it from the problem's client sizes for ``Algorithm.init``, so a
      joint initializer can weight clients by their data; None outside a run).
  """

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

  def loss_and_grad(self, params: Params, key: jax.Array) -> tuple[jax.Array, Params]:
    """Loss and gradient at ``params`` on a fresh batch drawn with ``key``."""
    return jax.value_and_grad(self.loss_fn)(params, self.sample(key))


class Arrivals(NamedTuple):
  """What the server knows about the messages of one server step (leading axis M).

  M is the engine's padded width (a multiple of the device count, at least the
  schedule's M or, always-on, N): a rule must use only the rows where ``mask`` is
  True for counts, means and normalizers, never ``mask.shape[0]``. Padded rows hold
  finite messages (a real client's job), so a 0 weight removes them exactly.

  Each message travels with its client's example count (``num_examples``), and the
  step with the population's total (``total_examples``, over all N clients), so a
  server weights by data (``weighting='examples'``, :mod:`afl_jax.servers.weighting`)
  with no run context. The engine fills both from the problem's client sizes (every
  client counts 1 when the problem has none); built by hand, they may stay None for
  a rule that weights uniformly.
  """

  client_ids: jax.Array  # int32[M]
  staleness: jax.Array  # int32[M], tau = t - start_step
  mask: jax.Array  # bool[M], False = padding / not reporting
  num_steps: jax.Array  # int32[M], K_{t,i}
  start_broadcast: Broadcast  # [M, ...] the broadcast each client started from
  step: jax.Array  # int32 scalar, server step t
  num_examples: Any = None  # int32[M], examples of each row's client (n_i)
  total_examples: Any = None  # int32 scalar, sum_{j=1}^{N} n_j


def unchanged_if_no_arrival(arrivals: Arrivals, new_state: Any, state: Any) -> Any:
  """The server-step contract: ``new_state`` if any arrival is valid, else ``state``.

  A step at which no client reports (waiting windows, imported traces) must not
  move the server: no momentum or adaptive step on an empty buffer, no step count.
  """
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

  regime:
    'per_job'   only the arriving clients compute, each from its stored start
                broadcast (FedBuff, FedAsync, FedFa, FedGM, MasFL, FedEcho).
    'always_on' every client trains every server step on its own local model
                (client state); the schedule says only who reports (AsynFL eq. 4).
  init: optional joint initializer ``init(params, tasks, key) -> (server_state,
    client_states)`` for algorithms whose server state depends on every client
    (MasFL's c_i^0); ``tasks`` is a LocalTask batched over all N clients. The
    default initializes each side on its own.
  prepare: optional host-side ``prepare(algorithm, schedule) -> Algorithm``, run
    once before any compute (:func:`prepared`) with the algorithm itself (so a
    ``_replace``d recipe keeps its changes): it rejects a schedule the algorithm
    cannot honour (raising ``ScheduleError``/``ValueError`` with the reason; AsynFL's
    continuous training) and sizes state that depends on the schedule (MasFL's
    per-client history of variates). ``schedule`` may also be a list of schedules
    (the replicas of a sweep, sharing one compiled program): the result must then
    suit every one of them. The returned algorithm has ``prepare=None``.
  """

  name: str
  client: ClientRule
  server: ServerRule
  compressor: Any = None
  regime: str = 'per_job'
  init: Callable[..., tuple[ServerState, ClientState]] | None = None
  prepare: Callable[[Algorithm, Any], Algorithm] | None = None


def prepared(algorithm: Algorithm, schedule: Any) -> Algorithm:
  """``algorithm`` specialized to ``schedule`` (its ``prepare`` hook, if any), on the host.

  Every entry point that runs an algorithm along a schedule calls this first
  (``afl_jax.core.simulator.Simulator`` does), so a schedule the algorithm cannot
  honour fails before any compute.
  """
  if algorithm.prepare is None:
    return algorithm
  out = algorithm.prepare(algorithm, schedule)
  return out._replace(prepare=None)
