"""The compiled run: one ``lax.scan`` over server steps, the arriving clients vmapped (or one at a
time where they convolve on CPU), and the host plan of a step's slots; docs/architecture.md."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from afl_jax.core import tree
from afl_jax.core.problem import Problem
from afl_jax.core.types import Algorithm, Arrivals, EmptyState, LocalTask
from afl_jax.errors import ArgumentError
from afl_jax.models import fast
from afl_jax.schedules.schedule import Schedule

REGIMES = ('per_job', 'always_on')
CLIENT_AXIS = 'clients'


class RingPlan(NamedTuple):
  read_slot: np.ndarray  # int32[T, M] slot holding each arrival's start broadcast
  write_slot: np.ndarray  # int32[T + 1] slot receiving version v (v = 0 at init)
  size: int  # number of slots


def plan_ring(schedule: Schedule) -> RingPlan:
  """The ring buffer of past broadcasts, planned on the host by greedy interval colouring of the
  versions' lifetimes (as many slots as versions ever live at once; per-job regime)."""
  t_total = schedule.num_steps
  last = np.full(t_total + 1, -1, np.int64)  # the last step reading each version (-1: none)
  steps = np.broadcast_to(np.arange(t_total)[:, None], schedule.mask.shape)[schedule.mask]
  np.maximum.at(last, schedule.start_step[schedule.mask], steps)
  write = np.zeros(t_total + 1, np.int32)
  free: list[int] = []
  busy: list[tuple[int, int]] = []  # (last use, slot)
  size = 0
  for v in range(t_total + 1):
    # version v is written after step v - 1: slots last read at step <= v - 1 are free
    while busy and busy[0][0] <= v - 1:
      heapq.heappush(free, heapq.heappop(busy)[1])
    if free:
      slot = heapq.heappop(free)
    else:
      slot, size = size, size + 1
    write[v] = slot
    if last[v] >= 0:
      heapq.heappush(busy, (int(last[v]), slot))
    else:
      heapq.heappush(free, slot)
  read = np.where(schedule.mask, write[schedule.start_step], 0).astype(np.int32)
  return RingPlan(read, write, max(size, 1))


class SimState(NamedTuple):
  """What a run carries from one server step to the next (and checkpoints)."""

  step: jax.Array  # int32 scalar: the next server step t
  server: Any  # ServerState
  clients: Any  # per-client state, leading axis N
  compressor: Any  # per-client compressor state, leading axis N
  ring: Any  # past broadcasts, leading axis = ring slots


class StepInputs(NamedTuple):
  """Per-step device inputs, leading axis = steps of a chunk."""

  client_ids: np.ndarray  # int32[C, M]
  ring_slot: np.ndarray  # int32[C, M] slot of the broadcast the client started from
  staleness: np.ndarray  # int32[C, M]
  num_steps: np.ndarray  # int32[C, M]
  train_mask: np.ndarray  # bool[C, M] whose client state is written back
  send_mask: np.ndarray  # bool[C, M] whose message the server uses
  write_slot: np.ndarray  # int32[C] slot receiving the step's broadcast
  active: np.ndarray  # bool[C] False for padding steps past the end of every schedule


def _up(n: int, m: int) -> int:
  return -(-n // m) * m


def _list(schedules: Schedule | Any) -> list[Schedule]:
  return [schedules] if isinstance(schedules, Schedule) else list(schedules)


# ---- the host plan: how a step's clients are trained ---------------------------------------
def per_client_steps(schedule: Schedule) -> np.ndarray:
  """int32[N]: each client's largest K over its arrivals (the overall largest if none)."""
  ids, ks = schedule.client_ids[schedule.mask], schedule.local_steps[schedule.mask]
  best = np.full(schedule.num_clients, -1, np.int32)
  np.maximum.at(best, ids, ks)
  return np.where(best >= 0, best, np.int32(schedule.max_local_steps))


def local_step_work(
  schedules: Schedule | Any, regime: str, num_slots: int, block_size: int, by_steps: bool
) -> tuple[int, int]:
  """``(useful, computed)`` local slot-steps (host, exact): the sum of K over trained slots, and
  what the engine runs (every slot to the largest K, or with ``by_steps`` each sorted block of
  ``block_size`` slots to its own largest K)."""
  schedules = _list(schedules)
  max_k = max(s.max_local_steps for s in schedules)
  useful = computed = 0
  for s in schedules:
    if regime == 'per_job':
      k, repeat = np.where(s.mask, s.local_steps, 0), 1
    else:
      k, repeat = per_client_steps(s)[None], s.num_steps
    k = -np.sort(-k.astype(np.int64), axis=1)  # largest first in every step
    useful += int(k.sum()) * repeat
    if by_steps:  # each sorted block's first (largest) K
      computed += int(k[:, ::block_size].sum()) * block_size * repeat
    else:
      computed += k.shape[0] * repeat * num_slots * max_k
  return useful, computed


def choose_step_blocks(
  schedules: Schedule | Any, regime: str, width: int, unit: int, target: float = 0.9
) -> int:
  """B: the fewest K-sorted blocks whose useful fraction reaches ``target`` (else the best), each
  of at least ``2 * unit`` slots so the products stay batched."""
  best, best_frac = 1, -1.0
  smallest = 2 * unit if width >= 2 * unit else unit
  sizes = {_up(width, b * unit) // b: b for b in range(max(width // unit, 1), 0, -1)}
  for size, b in sorted(sizes.items(), reverse=True):  # fewest blocks first
    if size < smallest:
      break
    useful, computed = local_step_work(schedules, regime, b * size, size, True)
    frac = useful / max(computed, 1)
    if frac >= target:
      return b
    if frac > best_frac + 1e-9:
      best, best_frac = b, frac
  return best


def plan_slots(schedules: Schedule | Any, regime: str, width: int, unit: int,
               local_step_buckets: int | None, client_block_size: int | None = None,
               platform: str = 'cpu') -> tuple[int, int, bool]:  # fmt: skip
  """``(num_slots, block_size, by_steps)`` for a step's ``width`` clients in multiples of ``unit``
  (the devices). ``local_step_buckets``: 0 padded, B >= 1 B blocks sorted by K, None chosen
  where it saves local steps on CPU (docs/performance.md); ``client_block_size``: blocks of that
  many slots."""
  b = local_step_buckets
  if b is not None and (isinstance(b, bool) or int(b) != b or b < 0):
    raise ValueError(f'local_step_buckets must be None or an integer >= 0; got {b!r}.')
  padded = (_up(width, unit), _up(width, unit), False)
  if client_block_size is not None:
    if client_block_size < 1 or b:
      raise ValueError(
        f'client_block_size must be >= 1 and local_step_buckets None or 0; got '
        f'{client_block_size} and {b}.'
      )
    block = _up(int(client_block_size), unit)
    plan = (_up(width, block), block, b is None)
    padded = plan[:2] + (False,)
  elif b == 0 or (b is None and platform != 'cpu'):
    return padded
  else:
    blocks = b or choose_step_blocks(schedules, regime, width, unit)
    slots = _up(width, blocks * unit)
    plan = (slots, slots // blocks, True)
  work = lambda p: local_step_work(schedules, regime, *p)[1]
  # automatic: sorted blocks only where they save local steps
  return padded if b is None and plan[2] and work(plan) >= work(padded) else plan


def step_inputs(schedule: Schedule, regime: str, start: int, length: int,
                num_slots: int | None = None, ring_plan: RingPlan | None = None
                ) -> StepInputs:  # fmt: skip
  """Host inputs of steps ``[start, start + length)``: slots padded to ``num_slots``, steps past
  the schedule's end masked; always-on trains every client every step."""
  stop = max(start, min(start + length, schedule.num_steps))  # a replica may have ended
  c, sl = stop - start, slice(start, stop)
  if regime == 'per_job':
    ring_plan = plan_ring(schedule) if ring_plan is None else ring_plan
    ids, st = schedule.client_ids[sl], ring_plan.read_slot[sl]
    tau, k = schedule.staleness[sl], schedule.local_steps[sl]
    train = send = schedule.mask[sl]
  else:  # always_on: the schedule says who reports
    n, m = schedule.num_clients, schedule.mask[sl]
    rows, cols = np.nonzero(m)[0], schedule.client_ids[sl][m]
    ids, st = np.broadcast_to(np.arange(n, dtype=np.int32), (c, n)), np.zeros((c, n), np.int32)
    send, tau = np.zeros((c, n), bool), np.zeros((c, n), np.int32)
    send[rows, cols], tau[rows, cols] = True, schedule.staleness[sl][m]
    k, train = np.broadcast_to(per_client_steps(schedule), (c, n)), np.ones((c, n), bool)
  width = max(num_slots or 0, ids.shape[1])
  out = []
  for a, fill in zip((ids, st, tau, k, train, send), (0, 0, 0, 1, False, False)):
    full = np.full((length, width), fill, np.asarray(a).dtype)
    full[:c, : a.shape[1]] = a
    out.append(full)
  write = np.zeros(length, np.int32)
  if regime == 'per_job':
    write[:c] = ring_plan.write_slot[start + 1 : stop + 1]
  return StepInputs(*out, write, np.arange(length) < c)


# ---- the device program ----------------------------------------------------------------
def example_counts(problem: Problem) -> jax.Array:
  """int32[N]: each client's example count (1 each when the problem has no sizes)."""
  if problem.client_sizes is None:
    return jnp.ones(problem.num_clients, jnp.int32)
  return jnp.asarray(problem.client_sizes, jnp.int32)


def default_mesh() -> Mesh:
  """All devices (of every process) on one 'clients' axis."""
  return Mesh(np.array(jax.devices()), (CLIENT_AXIS,))


def to_host(x: jax.Array) -> np.ndarray:
  """NumPy on every process: a replicated array's local copy, else gathered (a collective)."""
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    if x.is_fully_replicated:
      x = x.addressable_data(0)
    else:
      from jax.experimental import multihost_utils

      x = multihost_utils.process_allgather(x, tiled=True)
  return np.asarray(x)


def train_clients(fn: Callable, args: tuple, in_axes: tuple, mesh: Mesh | None = None) -> Any:
  """``fn`` over the slots of ``args`` (``in_axes``: 0 per slot, None shared): vmapped, or where
  :func:`afl_jax.models.fast.one_at_a_time` says so, one client at a time (``lax.map``), each
  device of ``mesh`` its own slots; docs/performance.md, "Convolutional models"."""
  slot = lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype)
  one = [a if ax is None else jax.tree.map(slot, a) for a, ax in zip(args, in_axes)]
  if not fast.one_at_a_time(jax.make_jaxpr(fn)(*one).jaxpr):
    return jax.vmap(fn, in_axes=in_axes)(*args)

  def each(*args):
    def one_slot(mapped):
      it = iter(mapped)
      return fn(*(a if ax is None else next(it) for a, ax in zip(args, in_axes)))

    return jax.lax.map(one_slot, tuple(a for a, ax in zip(args, in_axes) if ax is not None))

  if mesh is None or mesh.size == 1:
    return each(*args)
  specs = tuple(P() if ax is None else P(CLIENT_AXIS) for ax in in_axes)
  shard = jax.shard_map(each, mesh=mesh, in_specs=specs, out_specs=P(CLIENT_AXIS), check_vma=False)
  return shard(*args)


class Program(NamedTuple):
  """ONE run's pure functions (a sweep vmaps them over replicas): ``init(params, key, problem,
  hparams, client_steps)``, ``chunk(state, inputs, problem, key, hparams) -> (state, outputs)``,
  ``params(state, hparams)``."""

  init: Callable[..., SimState]
  chunk: Callable[..., tuple[SimState, dict]]
  params: Callable[..., Any]


def _identity(t: Any) -> Any:
  return t


def make_program(build: Callable[[Any], Algorithm], *, ring_size: int, max_steps: int,
                 num_slots: int, block_size: int, by_steps: bool = False,
                 report_slots: int | None = None, record_params: bool = False,
                 constrain: Callable[[Any], Any] = _identity, mesh: Mesh | None = None
                 ) -> Program:  # fmt: skip
  """The functions of a run whose algorithm is ``build(hparams)`` (called inside the trace),
  training ``num_slots`` slots per step in blocks of ``block_size`` (docs/architecture.md, "A
  server step"); ``constrain`` pins a slot-stacked tree to ``mesh``; a step whose
  ``inputs.active`` is False leaves the state as it is."""
  num_blocks = num_slots // block_size
  width = report_slots or num_slots

  def init(params, key, problem, hparams, client_steps) -> SimState:
    alg = build(hparams)
    init_key = jax.random.fold_in(key, 0x7FFFFFFF)
    n = problem.num_clients
    tasks = LocalTask(
      view=problem.client_views, shared=problem.shared,
      num_steps=jnp.asarray(client_steps, jnp.int32), active=jnp.ones(n, bool),
      client_id=jnp.arange(n, dtype=jnp.int32), loss_fn=problem.loss_fn,
      sample_fn=problem.sample_fn, max_steps=max_steps, num_examples=example_counts(problem),
    )  # fmt: skip
    if alg.init is not None:
      server_state, client_states = alg.init(params, tasks, init_key)
    else:
      server_state = alg.server.init(params)
      keys = jax.random.split(init_key, n)
      client_states = jax.vmap(alg.client.init, in_axes=(None, tasks.batch_axes(), 0))(
        params, tasks, keys
      )
    # JAX clamps out-of-range reads and drops writes: a mismatch would run silently wrong
    table = getattr(server_state, 'num_clients', None)
    if table is not None and table != n:
      raise ArgumentError(
        f'{alg.name}: the server keeps per-client state for num_clients={table} (client ids in '
        f'[0, {table - 1}]) but the problem has {n} clients (ids in [0, {n - 1}]); build the '
        f'server with num_clients={n}.'
      )
    bcast = alg.server.broadcast(server_state)
    comp_states = EmptyState()
    if alg.compressor is not None:  # its state is shaped like one client's message
      task = jax.tree.map(lambda a: a[0], tasks.replace(shared=None)).replace(shared=problem.shared)
      first = tree.gather(client_states, 0)
      msg = jax.eval_shape(alg.client.update, bcast, first, task, jax.random.key(0))[0]
      template = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), msg)
      comp_states = jax.vmap(lambda _: alg.compressor.init(template))(jnp.arange(n))
    ring_ = tree.stack_n(bcast, ring_size)
    return SimState(jnp.zeros((), jnp.int32), server_state, client_states, comp_states, ring_)

  def chunk(state: SimState, inputs: StepInputs, problem: Problem, key: jax.Array, hparams):
    alg = build(hparams)
    server, compressor = alg.server, alg.compressor

    def one_client(
      shared, hparams, bcast, cstate, view, key, num_steps, active, cid, t, tau, bound
    ):  # what it reads is an argument (train_clients)
      task = LocalTask(
        view=view, shared=shared, num_steps=num_steps, active=active, client_id=cid,
        loss_fn=problem.loss_fn, sample_fn=problem.sample_fn, max_steps=max_steps, step=t,
        start_step=t - tau, loop_steps=bound,
      )  # fmt: skip
      return build(hparams).client.update(bcast, cstate, task, key)

    def train_block(clients, xb, ring_, key_t, t):
      """One block of slots: gather, train, scatter the trained clients' state."""
      (ids, slot, tau, k, train, send), bound = xb
      bcast = constrain(tree.gather(ring_, slot))
      cstate = constrain(tree.gather(clients, ids))
      views = constrain(tree.gather(problem.client_views, ids))
      ckeys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.fold_in(key_t, 0), ids)
      args = (problem.shared, hparams, bcast, cstate, views, ckeys, k, send, ids, t, tau, bound)
      in_axes = (None, None) + (0,) * 7 + (None, 0, None)
      msgs, new_cstate, cmetrics = train_clients(one_client, args, in_axes, mesh)
      clients = tree.scatter(clients, ids, constrain(new_cstate), train)
      return clients, (msgs, cmetrics)

    def train(clients, x: StepInputs, ring_, key_t, t):
      """Every slot of the step, in ``num_blocks`` blocks (sorted by K with ``by_steps``)."""
      slots, bounds = tuple(x[:6]), None
      if by_steps:
        k = jnp.where(x.train_mask, jnp.minimum(x.num_steps, max_steps), 0)
        if num_blocks > 1:
          order = jnp.argsort(-k, stable=True)
          slots, k = tuple(a[order] for a in slots), k[order]
        bounds = jnp.max(k.reshape((num_blocks, -1)), axis=1)
      blocks = (tuple(a.reshape((num_blocks, -1)) for a in slots), bounds)
      block = lambda c, xb: train_block(c, xb, ring_, key_t, t)
      if num_blocks == 1:
        clients, out = block(clients, jax.tree.map(lambda a: a[0], blocks))
      else:
        clients, out = jax.lax.scan(block, clients, blocks)
        out = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), out)
      if by_steps and num_blocks > 1:
        out = jax.tree.map(lambda a: a[jnp.argsort(order)], out)
      return clients, constrain(out)

    def step(state: SimState, x: StepInputs):
      t = state.step
      key_t = jax.random.fold_in(key, t)
      clients, (msgs, cmetrics) = train(state.clients, x, state.ring, key_t, t)
      comp_states = state.compressor
      bits_each = jnp.full((num_slots,), float(tree.dense_bits(msgs)) / num_slots, jnp.float32)
      if compressor is not None:
        msgs, comp_states, bits_each = compress_reports(
          compressor, msgs, comp_states, x, jax.random.fold_in(key_t, 1), width, constrain
        )
      counts = example_counts(problem)
      arrivals = Arrivals(
        x.client_ids, x.staleness, x.send_mask, x.num_steps,
        constrain(tree.gather(state.ring, x.ring_slot)), t, counts[x.client_ids], jnp.sum(counts),
      )  # fmt: skip
      server_state, smetrics = server.update(
        state.server, msgs, arrivals, jax.random.fold_in(key_t, 2)
      )
      new_bcast = server.broadcast(server_state)
      ring_ = jax.tree.map(
        lambda r, b: r.at[x.write_slot].set(b.astype(r.dtype)), state.ring, new_bcast
      )
      sent = x.send_mask.astype(jnp.float32)
      trained = x.train_mask.astype(jnp.float32)
      metrics = {
        f'client/{k}': jnp.sum(v * trained) / jnp.maximum(jnp.sum(trained), 1.0)
        for k, v in cmetrics.items()
      }
      metrics.update({f'server/{k}': v for k, v in smetrics.items()})
      metrics['arrivals'] = jnp.sum(sent)
      metrics['bits_up'] = jnp.sum(bits_each * sent)
      metrics['bits_down'] = jnp.sum(sent) * float(tree.dense_bits(new_bcast))
      out = {'metrics': metrics}
      if record_params:
        out['params'] = server.params(server_state)
      return SimState(t + 1, server_state, clients, comp_states, ring_), out

    def body(state, x):
      out_shape = jax.eval_shape(step, state, x)[1]
      skip = lambda s: (s, jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), out_shape))
      return jax.lax.cond(x.active, lambda s: step(s, x), skip, state)

    return jax.lax.scan(body, state, inputs)

  def params(state: SimState, hparams) -> Any:
    return build(hparams).server.params(state.server)

  return Program(init, chunk, params)


def compress_reports(compressor: Any, msgs: Any, comp_states: Any, x: StepInputs, key: jax.Array,
                     width: int, constrain: Callable[[Any], Any] = _identity
                     ) -> tuple[Any, Any, jax.Array]:  # fmt: skip
  """``(msgs, comp_states, bits_each)`` with the reporting slots' messages compressed (``width``
  rows, each keyed by ``fold_in(key, client_id)``); an absent client's compressor state stays
  frozen (AsynFLC-EF, Alg. 1 lines 8-16)."""
  pos = jnp.nonzero(x.send_mask, size=width, fill_value=0)[0]
  valid = jnp.arange(width) < jnp.sum(x.send_mask)
  ids = x.client_ids[pos]
  keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, ids)
  rows = constrain(tree.gather(msgs, pos))
  sent, new_comp, bits = jax.vmap(compressor.compress)(rows, tree.gather(comp_states, ids), keys)
  comp_states = tree.scatter(comp_states, ids, constrain(new_comp), valid)
  msgs = constrain(tree.scatter(msgs, pos, constrain(sent), valid))
  bits_each = tree.scatter(jnp.zeros(x.send_mask.shape, jnp.float32), pos, bits, valid)
  return msgs, comp_states, bits_each
