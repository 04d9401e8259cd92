"""The simulator: one jitted ``lax.scan`` over server steps, clients under ``jax.vmap``.

Each server step t (docs/architecture.md):

1. gathers each arriving client's start broadcast from a buffer of past broadcasts
   whose slots are planned on the host from the schedule (:mod:`afl_jax.core.ring`:
   as many slots as versions are ever live at once);
2. runs the arriving clients' :class:`~afl_jax.core.types.ClientRule` together
   with ``jax.vmap`` (local steps are an inner loop masked per client; where K
   differs, the slots are sorted by K into blocks, each looping only up to its own
   largest K, see ``local_step_buckets``);
3. gathers/scatters per-client state by client id (padded slots never write);
4. passes each message through the per-client compressor, if any (its state is
   updated only for clients that report, so it stays frozen while they are absent;
   in the always-on regime only the reporting clients' messages are compressed,
   gathered into a block as wide as the most reports of any step,
   :func:`compress_reports`);
5. applies the :class:`~afl_jax.core.types.ServerRule` to the stacked messages and
   pushes the new broadcast into the ring.

The per-run functions (``init``, ``chunk``) come from :func:`make_program`, which
builds the algorithm inside the trace from a (possibly traced) hyperparameter pytree:
:class:`Simulator` runs them for one run, and a sweep (:mod:`afl_jax.core.replicas`)
``vmap``s the same functions over a leading replica axis.

The run is split into chunks of ``chunk_size`` steps (between evaluations); every
chunk is the same compiled function, so a whole run compiles once. The last chunk
is padded with inactive steps that leave the state untouched.

Randomness: step t uses ``fold_in(key, t)``; client i at step t uses
``fold_in(fold_in(key_t, 0), i)`` and its compressor ``fold_in(fold_in(key_t, 1), i)``;
the server ``fold_in(key_t, 2)``. No draw therefore depends on the slot a client
occupies or on how the run is chunked (a chunked run is bitwise the same; permuted
slots change only the order of the sums over a step's arrivals).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from afl_jax.core import ring, tree
from afl_jax.core.problem import Problem
from afl_jax.core.types import Algorithm, Arrivals, EmptyState, LocalTask
from afl_jax.errors import ArgumentError
from afl_jax.schedules.schedule import Schedule

REGIMES = ('per_job', 'always_on')
CLIENT_AXIS = 'clients'


class SimState(NamedTuple):
  """Everything a run carries from one server step to the next (and checkpoints)."""

  step: jax.Array  # int32 scalar: the next server step t
  server: Any  # ServerState
  clients: Any  # per-client state, leading axis N
  compressor: Any  # per-client compressor state, leading axis N
  ring: Any  # past broadcasts, leading axis R


class StepInputs(NamedTuple):
  """Per-step device inputs, leading axis = steps of a chunk."""

  client_ids: np.ndarray  # int32[C, M]
  ring_slot: np.ndarray  # int32[C, M] ring slot holding the broadcast the client started from
  staleness: np.ndarray  # int32[C, M]
  num_steps: np.ndarray  # int32[C, M]
  train_mask: np.ndarray  # bool[C, M] whose client state is written back
  send_mask: np.ndarray  # bool[C, M] whose message the server uses
  write_slot: np.ndarray  # int32[C] ring slot receiving the broadcast made by the step
  active: np.ndarray  # bool[C] False for padding steps past the end of the schedule


def per_client_steps(schedule: Schedule) -> np.ndarray:
  """int32[N]: each client's largest K over its arrivals (max over all if it never arrives)."""
  out = np.full(schedule.num_clients, schedule.max_local_steps, np.int32)
  ids, ks = schedule.client_ids[schedule.mask], schedule.local_steps[schedule.mask]
  if ids.size:
    seen = np.zeros(schedule.num_clients, bool)
    seen[ids] = True
    best = np.zeros(schedule.num_clients, np.int32)
    np.maximum.at(best, ids, ks)
    out = np.where(seen, best, out)
  return out


def _sorted_steps(schedule: Schedule, regime: str) -> tuple[np.ndarray, int]:
  """``(k, repeat)``: K of each trained slot (0 = not trained), sorted largest first in
  every step, ``[T, M]``; for the always-on regime one row ``[1, N]`` repeated T times."""
  if regime == 'per_job':
    k, repeat = np.where(schedule.mask, schedule.local_steps, 0), 1
  else:
    k, repeat = per_client_steps(schedule)[None], schedule.num_steps
  return -np.sort(-k.astype(np.int32), axis=1), repeat


def _sorted_parts(schedules: Schedule | Any, regime: str) -> list[tuple[np.ndarray, int]]:
  """:func:`_sorted_steps` of one schedule or of each of several (a sweep's replicas)."""
  if isinstance(schedules, Schedule):
    return [_sorted_steps(schedules, regime)]
  return [_sorted_steps(s, regime) for s in schedules]


def _work(parts: list[tuple[np.ndarray, int]], num_slots: int, num_blocks: int) -> tuple[int, int]:
  useful = computed = 0
  size = num_slots // num_blocks
  for k, repeat in parts:
    useful += int(k.sum(dtype=np.int64)) * repeat
    firsts = k[:, ::size].astype(np.int64)  # each sorted block's largest K (padding: 0)
    computed += int(firsts.sum()) * size * repeat
  return useful, computed


def local_step_work(
  schedule: Schedule | Any, regime: str, num_slots: int, num_blocks: int, adaptive: bool
) -> tuple[int, int]:
  """``(useful, computed)`` local slot-steps of a run (host, exact).

  useful: the sum of K over the trained slots (arrivals; always-on: every client every
  step). computed: slot-steps the engine runs: ``num_slots * max K`` per step on the
  padded path; with ``adaptive`` (see :func:`make_program`) each block of slots sorted
  by K runs ``block size * its max K``. ``schedule`` may be a list (the replicas of a
  sweep, each counted with its own blocks; the padded path runs every replica's local
  loop to the largest K of all).
  """
  parts = _sorted_parts(schedule, regime)
  if not adaptive:
    schedules = [schedule] if isinstance(schedule, Schedule) else list(schedule)
    max_k = max(s.max_local_steps for s in schedules)
    useful = sum(int(k.sum(dtype=np.int64)) * r for k, r in parts)
    return useful, sum(k.shape[0] * r for k, r in parts) * num_slots * max_k
  return _work(parts, num_slots, num_blocks)


def choose_step_blocks(
  schedule: Schedule | Any, regime: str, width: int, unit: int, target: float = 0.9
) -> int:
  """B: the fewest blocks whose useful-step fraction (:func:`local_step_work`) reaches
  ``target``, else the best fraction (fewest blocks among equals).

  B blocks hold ``ceil(width / (B * unit)) * unit`` slots each (``unit``: the devices
  the client axis is sharded over); every distinct block size down to ``2 * unit`` is
  tried (at least two clients per device, so the products stay batched). ``schedule``
  may be a list (a sweep's replicas share one B).
  """
  parts = _sorted_parts(schedule, regime)
  best, best_frac, seen = 1, -1.0, set()
  smallest = 2 * unit if width >= 2 * unit else unit
  for b in range(1, max(width // unit, 1) + 1):
    size = -(-width // (b * unit)) * unit  # as the Simulator sizes B blocks
    if size in seen or size < smallest:  # the same blocks with more padding; too small
      continue
    seen.add(size)
    useful, computed = _work(parts, b * size, b)
    frac = useful / max(computed, 1)
    if frac >= target:
      return b
    if frac > best_frac + 1e-9:
      best, best_frac = b, frac
  return best


def mesh_platform(mesh: Mesh) -> str:
  """The platform of ``mesh``'s devices ('cpu', 'gpu', 'tpu')."""
  return mesh.devices.flat[0].platform


def plan_slots(
  schedules: Schedule | Any,
  regime: str,
  width: int,
  unit: int,
  local_step_buckets: int | None,
  client_block_size: int | None = None,
  platform: str = 'cpu',
) -> tuple[int, int, bool]:
  """``(num_slots, block_size, adaptive)``: how a step's ``width`` clients are trained.

  ``unit``: the devices the client axis is sharded over (slots are a multiple of it);
  ``local_step_buckets`` and ``client_block_size`` as in :class:`Simulator`.
  ``schedules``: one schedule, or a sweep's replicas (one plan for all of them).
  ``platform``: the devices' platform. The automatic choice (``local_step_buckets=None``)
  groups by K only on 'cpu': an accelerator runs a step's padded lanes in parallel, so
  blocks run one after another cost more than the masked steps they save (0.3-0.7x on an
  H100, docs/performance.md); there it keeps the padded path.
  """
  d = unit
  buckets = local_step_buckets
  if buckets is not None and (isinstance(buckets, bool) or int(buckets) != buckets or buckets < 0):
    raise ValueError(f'local_step_buckets must be None or an integer >= 0; got {buckets!r}.')
  if client_block_size is not None:
    if client_block_size < 1:
      raise ValueError(f'client_block_size must be >= 1; got {client_block_size}.')
    if buckets:
      raise ValueError('give client_block_size or local_step_buckets, not both.')
    block = -(-int(client_block_size) // d) * d
    num_slots = -(-width // block) * block
    block_size = block
    adaptive = buckets is None
  elif buckets == 0 or (buckets is None and platform != 'cpu'):
    num_slots = block_size = -(-width // d) * d
    adaptive = False
  else:
    blocks = int(buckets) if buckets else choose_step_blocks(schedules, regime, width, d)
    num_slots = -(-width // (blocks * d)) * blocks * d
    block_size = num_slots // blocks
    adaptive = True
  if adaptive and buckets is None:  # auto: only where it saves local steps
    padded_slots = num_slots if client_block_size is not None else -(-width // d) * d
    padded = local_step_work(schedules, regime, padded_slots, 1, False)[1]
    blocks = num_slots // block_size
    if local_step_work(schedules, regime, num_slots, blocks, True)[1] >= padded:
      adaptive = False
      if client_block_size is None:
        num_slots = block_size = padded_slots
  return num_slots, block_size, adaptive


def step_inputs(
  schedule: Schedule,
  regime: str,
  start: int,
  length: int,
  num_slots: int | None = None,
  ring_plan: ring.RingPlan | None = None,
) -> StepInputs:
  """Host inputs for steps ``[start, start + length)``, padded past the schedule's end.

  ``num_slots`` pads the arrival axis with masked slots (to a multiple of the number
  of devices the client axis is sharded over). ``ring_plan`` says where broadcasts
  live (default :func:`afl_jax.core.ring.plan`; the always-on regime uses one slot).
  """
  if ring_plan is None:
    ring_plan = ring.plan(schedule) if regime == 'per_job' else None
  t_total = schedule.num_steps
  stop = min(start + length, t_total)
  sl = slice(start, stop)
  pad = length - (stop - start)
  if regime == 'per_job':
    ids, st = schedule.client_ids[sl], ring_plan.read_slot[sl]
    tau, k = schedule.staleness[sl], schedule.local_steps[sl]
    train = send = schedule.mask[sl]
  else:  # always_on: every client trains every step; the schedule says who reports.
    n = schedule.num_clients
    c = stop - start
    rows = np.repeat(np.arange(c), schedule.max_arrivals)
    m = schedule.mask[sl].reshape(-1)
    cols = schedule.client_ids[sl].reshape(-1)
    ids = np.broadcast_to(np.arange(n, dtype=np.int32), (c, n))
    st = np.zeros((c, n), np.int32)
    send = np.zeros((c, n), bool)
    send[rows[m], cols[m]] = True
    tau = np.zeros((c, n), np.int32)
    tau[rows[m], cols[m]] = schedule.staleness[sl].reshape(-1)[m]
    k = np.broadcast_to(per_client_steps(schedule), (c, n))
    train = np.ones((c, n), bool)
  arrays = [ids, st, tau, k, train, send]
  if pad:
    arrays = [
      np.concatenate(
        [a, np.repeat(a[-1:], pad, 0) if a.shape[0] else np.zeros((pad,) + a.shape[1:], a.dtype)]
      )
      for a in arrays
    ]
    arrays[4] = arrays[4].copy()
    arrays[5] = arrays[5].copy()
    arrays[4][length - pad :] = False
    arrays[5][length - pad :] = False
  width = arrays[0].shape[1]
  if num_slots is not None and num_slots > width:
    extra = num_slots - width
    fill = [0, 0, 0, 1, False, False]
    arrays = [
      np.concatenate([a, np.full((length, extra), f, a.dtype)], axis=1)
      for a, f in zip(arrays, fill)
    ]
  write = np.zeros(length, np.int32)
  if ring_plan is not None:
    write[: stop - start] = ring_plan.write_slot[start + 1 : stop + 1]
  active = np.arange(length) < (stop - start)
  return StepInputs(*(np.ascontiguousarray(a) for a in arrays), write, active)


def example_counts(problem: Problem) -> jax.Array:
  """int32[N]: each client's example count (1 each when the problem has no sizes).

  The engine gives these to the rules with every task (``LocalTask.num_examples``)
  and message (``Arrivals.num_examples``, ``Arrivals.total_examples``), so a server
  weights by data with no run context.
  """
  if problem.client_sizes is None:
    return jnp.ones(problem.num_clients, jnp.int32)
  return jnp.asarray(problem.client_sizes, jnp.int32)


def _all_tasks(problem: Problem, num_steps: np.ndarray, max_steps: int) -> LocalTask:
  n = problem.num_clients
  return LocalTask(
    view=problem.client_views,
    shared=problem.shared,
    num_steps=jnp.asarray(num_steps, jnp.int32),
    active=jnp.ones(n, bool),
    client_id=jnp.arange(n, dtype=jnp.int32),
    loss_fn=problem.loss_fn,
    sample_fn=problem.sample_fn,
    max_steps=max_steps,
    num_examples=example_counts(problem),
  )


def default_mesh() -> Mesh:
  """All devices (of every host after ``jax.distributed.initialize()``) on one 'clients' axis."""
  return Mesh(np.array(jax.devices()), (CLIENT_AXIS,))


def to_host(x: jax.Array) -> np.ndarray:
  """An array as NumPy on every process (works on multi-host meshes too).

  Replicated: the local copy. Sharded over several processes (replica-mode sweep
  outputs): gathered from all of them, a collective every process must reach.
  """
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    if x.is_fully_replicated:
      x = x.addressable_data(0)
    else:
      from jax.experimental import multihost_utils

      x = multihost_utils.process_allgather(x, tiled=True)
  return np.asarray(x)


def check_server_clients(name: str, server_state: Any, num_clients: int) -> None:
  """A server state with per-client tables (``state.num_clients``) sized for the problem.

  The tables are indexed by client id, and JAX clamps an out-of-range read and drops
  an out-of-range write, so a server built for fewer clients (``num_clients=10``,
  the standalone default) would run silently wrong: refused here, before any compute.
  """
  table = getattr(server_state, 'num_clients', None)
  if table is not None and table != num_clients:
    raise ArgumentError(
      f'{name}: the server keeps per-client state for num_clients={table} (client ids in '
      f'[0, {table - 1}]) but the problem has {num_clients} clients (ids in '
      f'[0, {num_clients - 1}]); build the server with num_clients={num_clients}.'
    )


class Program(NamedTuple):
  """The pure functions of ONE run, closed over its static plan.

  ``hparams`` is a pytree of (possibly traced) numeric hyperparameters handed to
  ``build(hparams) -> Algorithm``, which is called inside every trace: a single run
  passes ``()`` and a build that ignores it; a sweep (:mod:`afl_jax.core.replicas`)
  vmaps these functions over a leading replica axis of every argument.

  init(params, key, problem, hparams, client_steps) -> SimState
  chunk(state, inputs, problem, key, hparams) -> (state, {'metrics': ..., 'params'?: ...})
  params(state, hparams) -> the global model
  """

  init: Callable[..., SimState]
  chunk: Callable[..., tuple[SimState, dict]]
  params: Callable[..., Any]


def _identity(t: Any) -> Any:
  return t


def make_program(
  build: Callable[[Any], Algorithm],
  *,
  ring_size: int,
  max_steps: int,
  num_slots: int,
  block_size: int,
  record_params: bool = False,
  constrain: Callable[[Any], Any] = _identity,
  inactive: str = 'cond',
  adaptive_steps: bool = False,
  report_slots: int | None = None,
) -> Program:
  """The init and chunk functions of a run (see :class:`Program`).

  Args:
    build: ``build(hparams) -> Algorithm``; called inside the trace.
    ring_size: slots of the buffer of past broadcasts (static).
    max_steps: length of the local ``lax.scan`` (static; steps past K are masked).
    num_slots: arrival slots per step (static).
    block_size: slots trained together (divides ``num_slots``).
    record_params: also output the global params after every step.
    constrain: pins a tree stacked over arrival slots to the device mesh.
    inactive: how a padded step leaves the state untouched: 'cond' skips its work
      (``lax.cond``; the predicate must not be batched: under ``vmap`` a batched
      predicate turns the cond into a select over copies of every operand, the
      problem's data included); 'select' runs the step and selects the old state
      (for replicas whose schedules end at different steps).
    adaptive_steps: group a step's arrival slots by K: sort them by K (largest
      first, untrained slots last), train them in ``num_slots // block_size`` blocks
      and bound each block's local loop by its largest K (``LocalTask.loop_steps``, a
      dynamic trip count), then restore the slot order for the server. Per-client
      masking is unchanged, so results are the same; only skipped masked steps go.
      False: every slot runs ``max_steps`` loop iterations (the padded path).
    report_slots: always-on regime with a compressor: compress only the messages of
      the clients that report, gathered into a block of this many rows (static; at
      least the most reports of any step, a multiple of the devices), then scattered
      back (:func:`compress_reports`). None: compress every slot's message and keep
      the compressor state of the reporting ones (the same results, N compressions
      per step instead of |S_t|).
  """
  num_blocks = num_slots // block_size

  def message_template(alg, server_state, client_states, problem, client_steps):
    bcast = alg.server.broadcast(server_state)
    one_state = tree.gather(client_states, 0)
    tasks = _all_tasks(problem, client_steps, max_steps)
    task = tasks.replace(
      view=tree.gather(tasks.view, 0),
      num_steps=tasks.num_steps[0],
      active=tasks.active[0],
      client_id=tasks.client_id[0],
      num_examples=tasks.num_examples[0],
    )
    shape = jax.eval_shape(alg.client.update, bcast, one_state, task, jax.random.key(0))[0]
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape)

  def init(params, key, problem, hparams, client_steps) -> SimState:
    alg = build(hparams)
    init_key = jax.random.fold_in(key, 0x7FFFFFFF)
    tasks = _all_tasks(problem, client_steps, max_steps)
    if alg.init is not None:
      server_state, client_states = alg.init(params, tasks, init_key)
    else:
      server_state = alg.server.init(params)
      keys = jax.random.split(init_key, problem.num_clients)
      client_states = jax.vmap(alg.client.init, in_axes=(None, tasks.batch_axes(), 0))(
        params, tasks, keys
      )
    check_server_clients(alg.name, server_state, problem.num_clients)
    if alg.compressor is None:
      comp_states = EmptyState()
    else:
      template = message_template(alg, server_state, client_states, problem, client_steps)
      comp_states = jax.vmap(lambda _: alg.compressor.init(template))(
        jnp.arange(problem.num_clients)
      )
    ring = tree.stack_n(alg.server.broadcast(server_state), ring_size)
    return SimState(jnp.zeros((), jnp.int32), server_state, client_states, comp_states, ring)

  def chunk(state: SimState, inputs: StepInputs, problem: Problem, key: jax.Array, hparams):
    alg = build(hparams)
    client, server, compressor = alg.client, alg.server, alg.compressor
    # Always-on: every client trains, few report; compress after training, reports only.
    deferred = compressor is not None and alg.regime == 'always_on' and report_slots is not None

    def one_client(bcast, cstate, view, key, num_steps, active, cid, t, tau, bound):
      task = LocalTask(
        view=view,
        shared=problem.shared,
        num_steps=num_steps,
        active=active,
        client_id=cid,
        loss_fn=problem.loss_fn,
        sample_fn=problem.sample_fn,
        max_steps=max_steps,
        step=t,
        start_step=t - tau,
        loop_steps=bound,
      )
      return client.update(bcast, cstate, task, key)

    def client_block(carry, xb, ring, key_t, t, bound=None):
      """Train one block of arrival slots: gather, vmap, compress, scatter."""
      clients, comp = carry
      ids = xb.client_ids
      bcast = constrain(tree.gather(ring, xb.ring_slot))
      cstate = constrain(tree.gather(clients, ids))
      views = constrain(tree.gather(problem.client_views, ids))
      ckeys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.fold_in(key_t, 0), ids)
      msgs, new_cstate, cmetrics = jax.vmap(one_client, in_axes=(0,) * 7 + (None, 0, None))(
        bcast, cstate, views, ckeys, xb.num_steps, xb.send_mask, ids, t, xb.staleness, bound
      )
      msgs, new_cstate = constrain(msgs), constrain(new_cstate)
      clients = tree.scatter(clients, ids, new_cstate, xb.train_mask)
      if compressor is None or deferred:
        bits_each = jnp.full(ids.shape, _bits(msgs) / ids.shape[0], jnp.float32)
      else:
        kkeys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.fold_in(key_t, 1), ids)
        msgs, new_comp, bits_each = jax.vmap(compressor.compress)(
          msgs, tree.gather(comp, ids), kkeys
        )
        comp = tree.scatter(comp, ids, new_comp, xb.send_mask)
      return (clients, comp), (msgs, bits_each, cmetrics)

    def grouped_by_steps(carry, x: StepInputs, ring, key_t, t):
      """``client_block`` over blocks of slots sorted by K, each loop bounded by its max K."""
      k = jnp.where(x.train_mask, jnp.minimum(x.num_steps, max_steps), 0)
      if num_blocks == 1:
        return client_block(carry, x, ring, key_t, t, jnp.max(k))
      order = jnp.argsort(-k, stable=True)
      slots = tuple(a[order].reshape((num_blocks, -1)) for a in x[:-2])
      bounds = jnp.max(k[order].reshape((num_blocks, -1)), axis=1)
      carry, out = jax.lax.scan(
        lambda c, xb: client_block(
          c, StepInputs(*xb[0], x.write_slot, x.active), ring, key_t, t, xb[1]
        ),
        carry,
        (slots, bounds),
      )
      unsort = jnp.argsort(order)
      out = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:])[unsort], out)
      return carry, constrain(out)

    def do_step(state: SimState, x: StepInputs):
      t = state.step
      key_t = jax.random.fold_in(key, t)
      ids = x.client_ids
      carry = (state.clients, state.compressor)
      if adaptive_steps:
        (clients, comp_states), (msgs, bits_each, cmetrics) = grouped_by_steps(
          carry, x, state.ring, key_t, t
        )
      elif num_blocks == 1:
        (clients, comp_states), (msgs, bits_each, cmetrics) = client_block(
          carry, x, state.ring, key_t, t
        )
      else:  # blocks of slots one after another: bounded temporaries for huge M or N.
        slots = tuple(a.reshape((num_blocks, -1)) for a in x[:-2])
        (clients, comp_states), out = jax.lax.scan(
          lambda c, xb: client_block(
            c, StepInputs(*xb, x.write_slot, x.active), state.ring, key_t, t
          ),
          carry,
          slots,
        )
        msgs, bits_each, cmetrics = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), out)
        msgs = constrain(msgs)
      if deferred:
        msgs, comp_states, bits_each = compress_reports(
          compressor, msgs, comp_states, x, jax.random.fold_in(key_t, 1), report_slots, constrain
        )
      counts = example_counts(problem)
      arrivals = Arrivals(
        client_ids=ids,
        staleness=x.staleness,
        mask=x.send_mask,
        num_steps=x.num_steps,
        start_broadcast=constrain(tree.gather(state.ring, x.ring_slot)),
        step=t,
        num_examples=counts[ids],
        total_examples=jnp.sum(counts),
      )
      server_state, smetrics = server.update(
        state.server, msgs, arrivals, jax.random.fold_in(key_t, 2)
      )
      new_bcast = server.broadcast(server_state)
      ring = jax.tree.map(
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
      metrics['bits_down'] = jnp.sum(sent) * _bits(new_bcast)
      new_state = SimState(t + 1, server_state, clients, comp_states, ring)
      out = {'metrics': metrics}
      if record_params:
        out['params'] = server.params(server_state)
      return new_state, out

    def body(state, x):
      if inactive == 'select':  # run the step, keep the old state where inactive
        new_state, out = do_step(state, x)
        zeros = jax.tree.map(jnp.zeros_like, out)
        return tree.where(x.active, (new_state, out), (state, zeros))
      out_shape = jax.eval_shape(do_step, state, x)[1]
      skip = lambda s: (s, jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), out_shape))
      return jax.lax.cond(x.active, lambda s: do_step(s, x), skip, state)

    return jax.lax.scan(body, state, inputs)

  def params(state: SimState, hparams) -> Any:
    return build(hparams).server.params(state.server)

  return Program(init, chunk, params)


def compress_reports(
  compressor: Any,
  msgs: Any,
  comp_states: Any,
  x: StepInputs,
  key: jax.Array,
  width: int,
  constrain: Callable[[Any], Any] = _identity,
) -> tuple[Any, Any, jax.Array]:
  """Compress only the reporting slots' messages (always-on regime).

  AsynFLC / AsynFLC-EF (Yang, Hou, Wu, Alg. 1 lines 8-16, eqs. 7-9): only a client
  ``i in S_t`` uploads ``C(Delta + e_i)`` and updates ``e_i``; an absent client's
  ``e_i`` stays frozen. The slots with ``x.send_mask`` (ascending slot order) are
  gathered into a block of ``width`` rows (``width`` >= the most reports of any step;
  rows past ``|S_t|`` are padding whose results are dropped), compressed with the key
  ``fold_in(key, client_id)`` each, and scattered back: the message of a reporting
  slot is replaced by its compressed one, its compressor state written back, the
  other slots' messages (unused by the server: ``send_mask`` is False) and states
  left as they are.

  Returns:
    ``(msgs, comp_states, bits_each)``; ``bits_each`` is 0 for non-reporting slots.
  """
  num_slots = x.send_mask.shape[0]
  pos = jnp.nonzero(x.send_mask, size=width, fill_value=0)[0]
  valid = jnp.arange(width) < jnp.sum(x.send_mask)
  ids = x.client_ids[pos]
  rows = constrain(tree.gather(msgs, pos))
  keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, ids)
  sent, new_comp, bits = jax.vmap(compressor.compress)(rows, tree.gather(comp_states, ids), keys)
  sent, new_comp = constrain(sent), constrain(new_comp)
  comp_states = tree.scatter(comp_states, ids, new_comp, valid)
  msgs = constrain(tree.scatter(msgs, pos, sent, valid))
  bits_each = tree.scatter(jnp.zeros((num_slots,), jnp.float32), pos, bits, valid)
  return msgs, comp_states, bits_each


def report_width(schedules: Any, num_devices: int, num_slots: int) -> int:
  """Rows of the always-on compression block: the most reports of any step (at least
  1) over ``schedules``, rounded up to a multiple of ``num_devices``, at most ``num_slots``."""
  if isinstance(schedules, Schedule):
    schedules = [schedules]
  most = max(int(np.max(s.mask.sum(axis=1), initial=0)) for s in schedules)
  return min(-(-max(most, 1) // num_devices) * num_devices, num_slots)


def _bits(tree_: Any) -> float:
  """Bits of a pytree sent uncompressed (static): 32 per value."""
  return float(tree.dense_bits(tree_))
