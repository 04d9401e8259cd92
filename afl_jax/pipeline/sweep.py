"""Sweeps declared in ``config.sweep``: a grid of runs, as few compiles as the grid allows::

  c.sweep = {'hparams': {'client_lr': [0.01, 0.1]}, 'seed': [0, 1, 2]}   # 6 runs

Every point is built as a single run; points that differ only in traced hyperparameters
and the seed share a compile (a group). docs/reliability.md, "Sweeps", says what a
sweep's workdir holds and how a rerun reuses it; docs/performance.md, what it saves."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import jax
import ml_collections
import numpy as np
import pandas as pd
from ml_collections.config_flags import config_path

from afl_jax import algorithms, compression, schedules
from afl_jax.api import simulator as sweep_simulator
from afl_jax.core import memory, replicas
from afl_jax.core.memory import format_bytes
from afl_jax.errors import ConfigError
from afl_jax.pipeline import build as build_lib
from afl_jax.pipeline import checkpoint, loop, metrics_io, plotting, processes, sizes
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import record as record_lib
from afl_jax.pipeline import track as track_lib
from afl_jax.pipeline import workdir as workdir_lib

REPLICA_FIELDS = ('seed',)  # change only values, never the program: stacked on the replica axis
GROUPS_DIR = 'groups'


# ---- the grid: declared, validated, expanded ---------------------------------------------
def sweep_axes(sweep: Any, prefix: str = '') -> dict[str, list]:
  """Nested ``config.sweep`` -> ``{'hparams.client_lr': [...], 'seed': [...]}``."""
  out: dict[str, list] = {}
  for k, v in sweep.items():
    name = f'{prefix}{k}'
    if isinstance(v, Mapping | ml_collections.ConfigDict):
      out.update(sweep_axes(v, name + '.'))
    else:
      out[name] = list(v) if isinstance(v, list | tuple) else [v]
  return out


def algorithm_entry(entry: Any, field: str = 'sweep.algorithm') -> tuple[str, dict[str, Any]]:
  """A sweep's ``algorithm`` entry (a name, or a mapping with a ``name``) as (name, settings)."""
  if isinstance(entry, str):
    return entry, {}
  if isinstance(entry, Mapping | ml_collections.ConfigDict) and isinstance(entry.get('name'), str):
    return entry['name'], {k: v for k, v in dict(entry).items() if k != 'name'}
  what = field.rsplit('.', 1)[-1]
  why = f"each entry must be a name of a {what} or a mapping {{'name': NAME, SETTING: VALUE, ...}}"
  raise ConfigError.invalid(field, entry, f'{why}.')


@contextlib.contextmanager
def _entry(field: str, entry: Any) -> Iterator[None]:
  """A ConfigError inside the block names the sweep's entry."""
  try:
    yield
  except ConfigError as e:
    raise ConfigError(f'config.sweep.{field} entry {entry!r}: {e}', field=e.field) from None


def validate_sweep(c: ml_collections.ConfigDict) -> None:
  """``config.sweep``: every field exists with a non-empty list of values, each entry and
  value checked as a single run's would be, before any grid point is built."""
  if not c.get('sweep'):
    return
  axes = sweep_axes(c.sweep)
  for field, values in axes.items():
    if not values:
      raise ConfigError.invalid(f'sweep.{field}', [], 'give at least one value.')
  names = [c.algorithm] if c.algorithm in algorithms.ALGORITHMS else []
  if 'algorithm' in axes:
    names = []
    for entry in axes['algorithm']:
      name, given = algorithm_entry(entry)
      schedule = given.pop('schedule', None)  # the entry's own schedule settings
      with _entry('algorithm', entry):
        algorithms.ALGORITHMS.bind(name, given)
        if schedule is not None and not isinstance(schedule, Mapping | ml_collections.ConfigDict):
          raise ConfigError.invalid(
            'sweep.algorithm', entry, "'schedule' must be a mapping of schedule settings."
          )
        if schedule is not None:
          kind = schedule.get('kind', c.schedule.kind)
          takes = schedules.settings(kind) if kind in schedules.SCHEDULES else {}
          settings = {k: v for k, v in c.schedule.items() if k in takes} | dict(schedule)
          settings = {k: v for k, v in settings.items() if k not in ('kind', 'seed')}
          schedules.SCHEDULES.bind(kind, settings, facts={'num_clients': c.num_clients})
      names.append(name)
  for field, keep in config_lib.SECTION_FIELDS.items():  # a mapping with a 'kind'
    for entry in axes.get(field, ()):
      if not (
        isinstance(entry, Mapping | ml_collections.ConfigDict)
        and isinstance(entry.get('kind'), str)
      ):
        why = "each entry must be a mapping {'kind': KIND, SETTING: VALUE, ...}."
        raise ConfigError.invalid(f'sweep.{field}', entry, why)
      kind, given = (
        entry['kind'],
        {k: v for k, v in dict(entry).items() if k not in ('kind', *keep)},
      )
      with _entry(field, entry):
        if field == 'schedule':
          schedules.SCHEDULES.bind(kind, given, facts={'num_clients': c.num_clients})
        elif kind != 'none' or given:
          compression.COMPRESSORS.bind(kind, given)
  # Each section of settings with the registry and the names of the grid it applies to.
  within = {'hparams': (algorithms.ALGORITHMS, names)}
  for field, registry in config_lib.NAMED.items():
    grid_names = []
    for entry in axes.get(field, [c[field]] if c.get(field) in registry else []):
      name, given = algorithm_entry(entry, f'sweep.{field}')
      with _entry(field, entry):
        registry.bind(name, given)
      grid_names.append(name)
    within[registry.section] = (registry, grid_names)
  for field, values in axes.items():
    section, _, arg = field.partition('.')
    if section in within and arg:
      registry, grid_names = within[section]
      for name in grid_names:
        takes = registry.settings(name)
        if arg not in takes:
          what = 'hyperparameter' if section == 'hparams' else 'setting'
          raise ConfigError(
            f'config.sweep.{field} is invalid: {name!r} has no {what} '
            f'{arg!r}; valid: {sorted(takes)}.',
            field=f'sweep.{field}',
          )
        for value in values:  # each value as a single run's would be
          problem = registry.violation(name, arg, value)
          if problem is not None:
            raise ConfigError.invalid(
              f'sweep.{field}', list(values), f'the value {value!r} {problem}.'
            )
      continue
    if field == 'sweep' or field.startswith('sweep.'):
      raise ConfigError('config.sweep cannot sweep itself.', field='sweep')
    try:
      config_path.get_value(field, c)
    except (KeyError, AttributeError):
      if not field.startswith(('schedule.', 'compressor.')):
        raise ConfigError(
          f'config.sweep.{field} is invalid: config has no field {field!r}.',
          field=f'sweep.{field}',
        ) from None


_ENTRIES = ('algorithm', *config_lib.NAMED, *config_lib.SECTION_FIELDS)


def _show(value: Any) -> str:
  """A swept value in a run name: an entry as ``fadas(server_lr=0.0001)``."""
  if not isinstance(value, Mapping | ml_collections.ConfigDict):
    return str(value)
  entry = dict(value)
  name = entry.pop('kind', None) or entry.pop('name', None) or ''
  given = ','.join(f'{k}={_show(v)}' for k, v in sorted(entry.items()))
  return f'{name}({given})' if given else str(name)


def run_name(point: Mapping[str, Any]) -> str:
  """A directory name for a grid point, e.g. ``client_lr=0.1,seed=0``."""
  parts = [f'{k.rsplit(".", 1)[-1]}={_show(v)}' for k, v in point.items()]
  return ','.join(parts).replace('/', '_').replace(' ', '') or 'run'


def point_config(
  config: ml_collections.ConfigDict, point: Mapping[str, Any]
) -> ml_collections.ConfigDict:
  """``config`` with the grid point applied and no sweep: an entry replaces its component
  whole; a schedule/compressor entry keeps the section's ``seed``/``error_feedback``."""
  c = ml_collections.ConfigDict(config.to_dict())
  c.sweep = ml_collections.ConfigDict()
  if 'algorithm' in point:
    c.algorithm, given = algorithm_entry(point['algorithm'])
    schedule = given.pop('schedule', None)  # the entry's own schedule settings
    c.hparams = ml_collections.ConfigDict(given)
    if isinstance(schedule, Mapping | ml_collections.ConfigDict):
      c.schedule = ml_collections.ConfigDict(c.schedule.to_dict() | dict(schedule))
  for field, registry in config_lib.NAMED.items():
    if field in point:
      c[field], given = algorithm_entry(point[field], f'sweep.{field}')
      c[registry.section] = ml_collections.ConfigDict(given)
  for field in config_lib.SECTION_FIELDS:
    if isinstance(point.get(field), Mapping | ml_collections.ConfigDict):
      keep = {k: c[field][k] for k in config_lib.SECTION_FIELDS[field] if k in c[field]}
      c[field] = ml_collections.ConfigDict(keep | dict(point[field]))
  for field, value in point.items():
    if field in _ENTRIES:
      continue
    try:
      if field.startswith('hparams.') and field[len('hparams.') :] not in c.hparams:
        c.hparams[field[len('hparams.') :]] = value
      else:
        config_path.set_value(field, c, value, accept_new_attributes=True)
    except (TypeError, ValueError) as e:
      why = f'{" ".join(str(e).split())[:160]}'
      raise ConfigError.invalid(
        f'sweep.{field}', value, f'the value does not fit the field ({why}).'
      ) from None
  return c


def grid(config: ml_collections.ConfigDict) -> list[dict[str, Any]]:
  """The grid points of ``config.sweep``, in declaration order; ConfigError for an axis value
  the run does not read or two points that are one run, before anything is built."""
  axes = sweep_axes(config.sweep)
  declared = [dict(zip(axes, values)) for values in itertools.product(*axes.values())]
  seen: dict[str, dict[str, Any]] = {}
  for p in declared:
    c = config_lib.resolve(point_config(config, p))
    for field, value in p.items():
      if field in _ENTRIES:
        continue
      if not config_lib.reads(c, field, value):
        got = config_lib.read_value(c, field)
        raise ConfigError(
          f'config.sweep.{field} is invalid: the run {run_name(p)} does not read {field} (its '
          f'value {value!r} resolves to {got!r}: another field decides, e.g. the partition, '
          'local_epochs or the kind); remove the axis or sweep what the run reads.',
          field=f'sweep.{field}',
        )
    key = json.dumps(record_lib.computed(c), sort_keys=True)
    if key in seen:
      differ = [f for f in p if config_lib.plain(p[f]) != config_lib.plain(seen[key][f])]
      raise ConfigError(
        f'config.sweep is invalid: grid points {run_name(seen[key])!r} and {run_name(p)!r} are '
        f'the same run once resolved (the values of {", ".join(differ)} change nothing there); '
        'remove the duplicate value.',
        field='sweep',
      )
    seen[key] = p
  return declared


def traced_fields(config: ml_collections.ConfigDict) -> list[str]:
  """Swept hyperparameters traced within a group (:func:`replicas.is_traced` for every
  algorithm of the grid)."""
  axes = sweep_axes(config.sweep)
  entries = axes.get('algorithm', [config.algorithm])
  names = {algorithm_entry(e)[0] for e in entries}
  defaults = [algorithms.settings(n) for n in names if n in algorithms.ALGORITHMS]
  return [
    field
    for field, values in axes.items()
    if field.startswith('hparams.')
    and all(replicas.is_traced(k := field[len('hparams.') :], d.get(k), values) for d in defaults)
  ]


def group_key(
  point: Mapping[str, Any], traced: Iterable[str], run: build_lib.Run | None = None
) -> str:
  """Points with the same key share one compile: the same values but the traced ones and
  the seed, and the same run context for the algorithm's factory (but the model's apply)."""
  skip = set(traced) | set(REPLICA_FIELDS)
  context = [
    (f, record_lib._sha(np.asarray(getattr(run.info, f))))
    for f in (algorithms.ALGORITHMS.context(run.name) if run is not None else ())
    if f != 'apply_fn' and getattr(run.info, f) is not None
  ]
  kept = {k: v for k, v in point.items() if k not in skip}
  return json.dumps([kept, context], sort_keys=True, default=str)


def _padded(engine: dict[str, Any]) -> dict[str, Any]:
  """A group's engine options: a single run's, but padded where it lets the engine choose
  (results stay bit for bit the committed records')."""
  buckets = engine['local_step_buckets']
  return engine | {'local_step_buckets': 0 if buckets is None else buckets}


def _group_sim(runs, traced, limit: int | None = None) -> tuple[Any, Any, Any]:
  """(simulator, keys, stacked params0) of one group, from its built runs: nothing compiled
  or allocated yet."""
  first = runs[0]
  names = [f[len('hparams.') :] for f in traced]
  static = {k: v for k, v in first.hparams.items() if k not in names}
  per_replica = {k: [float(run.hparams[k]) for run in runs] for k in names}
  problems = [
    run.problem.replace(loss_fn=first.problem.loss_fn, sample_fn=first.problem.sample_fn)
    for run in runs
  ]
  sim = sweep_simulator(
    first.name,
    problems if len(runs) > 1 else problems[0],
    [run.schedule for run in runs],
    len(runs),
    chunk_size=first.cadence.eval_every,
    factory=first.factory,
    memory_limit_bytes=limit,
    **_padded(first.engine),
    **static,
    **per_replica,
  )
  keys = jax.random.wrap_key_data(np.stack([jax.random.key_data(run.key) for run in runs]))
  return sim, keys, replicas.stack_trees([run.params0 for run in runs])


# ---- sizes --------------------------------------------------------------------------------


def run_bytes(run: build_lib.Run) -> int:
  """Host bytes one built grid point holds until the sweep ends (data, schedule, problem)."""
  data = [a for a in run.data if isinstance(a, np.ndarray)]
  s = run.schedule
  arrays = data + [s.client_ids, s.start_step, s.local_steps, s.mask, s.wall_clock]
  arrays += jax.tree.leaves((run.problem, run.params0, run.info.unlabeled_x))
  return int(sum(np.asarray(x).nbytes if not hasattr(x, 'nbytes') else x.nbytes for x in arrays))


def _duration(seconds: float) -> str:
  if seconds < 120:
    return f'{seconds:.0f} s'
  return f'{seconds / 60:.0f} min' if seconds < 7200 else f'{seconds / 3600:.1f} h'


def plan(config, first: build_lib.Run, *, limit_bytes: int | None = None) -> dict[str, Any]:
  """The grid's host bytes from its first point; ConfigError for a grid whose
  built points would not fit in the host memory (:func:`sizes.host_limit`)."""
  n, per = math.prod(len(v) for v in sweep_axes(config.sweep).values()), run_bytes(first)
  limit = sizes.host_limit() if limit_bytes is None else limit_bytes
  out = {'runs': n, 'bytes_per_run': per, 'host_bytes': n * per}
  if limit is not None and n * per > limit:
    axes = sorted(sweep_axes(config.sweep).items(), key=lambda kv: -len(kv[1]))
    shown = ' x '.join(f'{len(v)} {k}' for k, v in axes)
    raise ConfigError(
      f'config.sweep is invalid: its grid has {n:,} runs ({shown}), holding about '
      f'{format_bytes(n * per)} on the host ({format_bytes(per)} per run) but the limit is '
      f'{format_bytes(limit)} ({sizes.HOST_FRACTION:.0%} of the available host memory); at most '
      f'{max(limit // max(per, 1), 0):,} runs fit: shorten the longest axes or split the grid.',
      field='sweep',
    )
  return out


def _fit_groups(groups, limit: int | None, log, fields) -> list[tuple[list[int], Any]]:
  """Each group's simulator, split into groups whose replicas fit the device memory (the
  engine's analytic estimate); one replica that does not fit is a ConfigError."""
  out = []
  for members, build_group in groups:
    group = build_group(members)
    report = group[0].estimate(group[2], group[1])
    r = len(members)
    if limit is None or report['total'] <= memory.SAFETY * limit:
      out.append((members, group))
      continue
    one_sim, one_keys, one_params = build_group(members[:1])
    one = one_sim.estimate(one_params, one_keys)
    if one['total'] > memory.SAFETY * limit:
      sizes.check_memory(one, limit, fields)
    per = max((report['total'] - one['total']) / max(r - 1, 1), 1.0)
    fit = max(int((memory.SAFETY * limit - (one['total'] - per)) // per), 1)
    while fit > 1:  # the linear model can miss by a few MB: the group's own check decides
      sim_fit, keys_fit, params_fit = build_group(members[:fit])
      if sim_fit.estimate(params_fit, keys_fit)['total'] <= memory.SAFETY * limit:
        break
      fit -= max(fit // 20, 1)
    chunks = [members[i : i + fit] for i in range(0, r, fit)]
    log(
      f'sweep: a group of {r} runs needs about {format_bytes(report["total"])} on the devices, '
      f'above {memory.SAFETY:.0%} of {format_bytes(limit)}: split into {len(chunks)} groups of '
      f'<= {fit} runs (one compile each)'
    )
    out.extend((chunk, build_group(chunk)) for chunk in chunks)
  return out


# ---- running ------------------------------------------------------------------------------
def train_sweep(
  config: ml_collections.ConfigDict,
  workdir: str,
  log: Callable[[str], None] = print,
  *,
  memory_limit_bytes: int | None = None,
  resume: bool = True,
) -> dict[str, Any]:
  """Run the grid of ``config.sweep``; returns what ``summary.json`` holds (``runs``,
  ``groups``, ``traced``, ``complete``).

  ``memory_limit_bytes``: what a group's analytic state may use (default: :func:`group_limit`,
  a fact of the machine, so that the grouping is a function of the config);
  ``resume=False`` deletes this grid's outputs first. User errors are one line, before
  compute. Several processes (docs/distributed.md): every one calls this; each group's
  replicas span all their devices, process 0 holds the workdir and writes its files (and
  logs), every process writes its checkpoint shards."""
  validate_sweep(config)
  writes, held = processes.is_writer(), []

  def hold() -> str:
    held.append(workdir_lib.acquire(workdir))
    loop.refuse_other_kind(held[0].path, 'sweep')
    return held[0].path

  path = workdir
  try:  # a refusal while holding the workdir releases it too
    path = processes.on_writer(hold, 'the workdir')
    return _train_sweep(
      config, path, log if writes else lambda *_: None, memory_limit_bytes, resume
    )
  except OSError as e:
    disk = workdir_lib.disk_error(e, path)
    if disk is None or not writes:
      raise
    raise workdir_lib.write_error(
      path,
      disk,
      'running the sweep',
      "the runs' metrics so far are in their <run>/metrics.jsonl; free space and run the same "
      'command to continue',
    ) from None
  finally:
    for lock in held:
      lock.release()


def group_limit() -> int | None:
  """The device memory a group may use: a fact of the machine, never the memory free at the
  start, so that the same config on the same kind of machine splits into the same groups
  (the same program, bit for bit). The backend's device memory; on CPU the total host RAM
  / :data:`afl_jax.core.memory.CPU_STATE_FACTOR` (the state shares it); several processes
  agree on the least (they must split the grid alike)."""
  if jax.default_backend() != 'cpu':
    limit = memory.available_bytes()
  else:
    total = memory.host_bytes('total')
    limit = None if total is None else int(total / memory.CPU_STATE_FACTOR)
  if jax.process_count() == 1:
    return limit
  from jax.experimental import multihost_utils

  every = np.asarray(multihost_utils.process_allgather(np.int64(-1 if limit is None else limit)))
  return None if (every < 0).any() else int(every.min())


def _train_sweep(config, workdir: str, log, limit: int | None, resume: bool) -> dict[str, Any]:
  t_start = time.time()
  axes = sweep_axes(config.sweep)
  traced = traced_fields(config)

  def build_points() -> tuple:
    with build_lib.reusing_data():  # every point is built before the first compile
      first = build_lib.build_point(point_config(config, {k: v[0] for k, v in axes.items()}))
      est = plan(config, first)  # the grid's size, before it is listed
      points = grid(config)
      runs = [first] + [build_lib.build_point(point_config(config, p)) for p in points[1:]]
    return first, est, points, runs

  first, est, points, runs = processes.agreed(build_points, 'building the grid')
  names = [run_name(p) for p in points]
  limit = group_limit() if limit is None else limit
  build = lambda ms: _group_sim([runs[i] for i in ms], traced, limit)  # noqa: E731
  dirs = [os.path.join(workdir, n) for n in names]
  keyed: dict[str, list[int]] = {}  # every point, finished or not: a run's group is its program
  for i, p in enumerate(points):
    keyed.setdefault(group_key(p, traced, runs[i]), []).append(i)
  groups = processes.agreed(
    lambda: _fit_groups([(m, build) for m in keyed.values()], limit, log, first.memory_fields),
    'fitting the groups to the memory',
  )
  # Each group a Program: its runs, folders, simulator, checkpoints.
  groups = [_program(m, built, workdir, dirs, runs) for m, built in groups]
  done = processes.on_writer(  # the groups whose every run finished (process 0 reads)
    lambda: [
      resume
      and all(
        checkpoint.finished(d, r.schedule.num_steps, r.cadence.eval_every)
        for d, r in zip(g.dirs, g.runs)
      )
      for g in groups
    ],
    'the finished runs',
  )
  fitted = [g for g, finished in zip(groups, done) if not finished]  # the groups to run
  todo = sum(len(g.runs) for g in fitted)
  flops = sum(  # each group's work checked, from its simulator (sizes.check_work)
    sizes.check_work(g.runs[0].work_fields, g.sim, g.runs[0].params0)['total_flops'] for g in fitted
  )

  def prepare() -> list[int | None]:  # every folder checked before anything is written
    if not resume:
      for d in dirs:
        track_lib.start_over(d)
      shutil.rmtree(os.path.join(workdir, GROUPS_DIR), ignore_errors=True)
    for g in groups:
      g.check()
    kept = os.path.join(workdir, GROUPS_DIR)  # other groupings' checkpoints go
    for old in os.listdir(kept) if os.path.isdir(kept) else ():
      if old not in {g.binding for g in fitted}:
        shutil.rmtree(os.path.join(kept, old))
    return [g.begin() for g in fitted]

  starts = processes.on_writer(prepare, 'resume')
  rate = sizes.ASSUMED_FLOPS['cpu' if jax.default_backend() == 'cpu' else 'other']
  processes_line = f'; {jax.process_count()} processes, {jax.device_count()} devices'
  log(
    f'sweep: {len(points)} runs ({len(points) - todo} finished earlier, reused) in '
    f'{len(fitted)} group(s), traced: {traced or "none"}; built runs about '
    f'{format_bytes(est["host_bytes"])} on the host, client training about {flops:.2g} '
    f'FLOP (~{_duration(flops / rate)} at an assumed {rate:.0e} FLOP/s)'
    + (processes_line if jax.process_count() > 1 else '')
  )
  infos, stopped = [], False
  write = lambda complete: _summarize(workdir, points, names, infos, traced, complete)  # noqa: E731
  if processes.is_writer():
    write(False)
  try:
    for k, (g, start) in enumerate(zip(fitted, starts)):
      info = _run_group(k, g, start, log)
      infos.append(info)
      stopped |= info['status'] == 'stopped'
      done = sum(len(g.runs) for g in fitted[: k + 1])
      spent = time.time() - t_start
      if done < todo:
        log(
          f'sweep: {done}/{todo} runs done in {_duration(spent)}; about '
          f'{_duration(spent / done * (todo - done))} left'
        )
  except KeyboardInterrupt:
    if processes.is_writer():
      write(False)
    raise workdir_lib.Interrupted(
      f'interrupted (Ctrl-C) in group {len(infos) + 1} of {len(fitted)}; the metrics so far are in '
      f'{workdir_lib.show(workdir)}/<run>/metrics.jsonl; the same command continues'
      + (
        ' from the last checkpoint'
        if first.cadence.checkpoint_every
        else ' (finished groups are kept)'
      )
    ) from None
  processes.barrier('afl_jax sweep records')  # every run's records are on disk: all read them
  out = write(not stopped)
  if processes.is_writer():
    records = {
      s['name']: metrics_io.read_metrics(os.path.join(workdir, s['name'])) for s in out['runs']
    }
    workdir_lib.write_text(os.path.join(workdir, 'summary.md'), _markdown(out['runs'], infos))
    title = f'sweep: {first.name}'
    plotting.plot_runs(records, os.path.join(workdir, 'plot.png'), title=title)
  processes.barrier('afl_jax sweep written')
  log(outcome(out)[1])
  return out


def _program(members, built, workdir: str, dirs, runs) -> track_lib.Program:
  """A group's :class:`~afl_jax.pipeline.track.Program`: its checkpoints in ``groups/<id>``,
  the id a digest of its runs' identities and its program."""
  runs = [runs[i] for i in members]
  ids = record_lib.digest_of(run.identity['digest'] for run in runs)
  gid = record_lib._sha(ids, json.dumps(record_lib.program(built[0])))[:16]
  folder = os.path.join(workdir, GROUPS_DIR, gid)
  return track_lib.Program(*built, runs, [dirs[i] for i in members], folder, gid)


def _run_group(k: int, g: track_lib.Program, start: int | None, log) -> dict:
  """Group ``k`` from ``start`` (None: step 0); returns its info."""
  t0, chunk_ends = time.time(), []
  on_chunk = lambda tracks, end: chunk_ends.append(time.time())  # noqa: E731
  if start is not None:
    log(f'group {k}: resumed from its checkpoint at server step {start}')
  state, status = g.run(start, on_chunk)
  compile_s = chunk_ends[0] - t0 if chunk_ends else None
  seconds = time.time() - t0
  at = g.sim.position(state)
  log(
    f'group {k} of {len(g.runs)} runs: compile + first chunk {compile_s or 0:.1f}s, total '
    f'{seconds:.1f}s; simulation state about {format_bytes(g.sim.memory["total"])} (analytic)'
    + (f'; stopped at server step {at} (stop_after_steps)' if status == 'stopped' else '')
  )
  if status == 'completed':  # finished: the records say so, the checkpoints are not needed
    processes.barrier('afl_jax group done')  # no process reads them any more
    if processes.is_writer():
      shutil.rmtree(g.checkpointer().directory, ignore_errors=True)
  info = {'runs': len(g.runs), 'status': status, 'mode': g.sim.mode}
  return info | {'compile_seconds': compile_s, 'seconds': seconds}


def _summarize(workdir, points, names, infos, traced, complete: bool) -> dict:
  """``summary.json`` (written by process 0): every run's record (:meth:`RunRecord.summary`)
  with its swept values."""
  runs = []
  for p, n in zip(points, names):
    rec = record_lib.read(os.path.join(workdir, n))
    runs.append(
      {'name': n, 'hparams': {k: v for k, v in p.items() if k != 'seed'}, 'config': rec.config}
      | rec.summary()
    )
  out = metrics_io.jsonable({'runs': runs, 'groups': infos, 'traced': traced, 'complete': complete})
  if processes.is_writer():
    text = json.dumps(out, indent=2, allow_nan=False) + '\n'
    workdir_lib.write_text(os.path.join(workdir, record_lib.SUMMARY_FILE), text)
  return out


def _markdown(summaries: list[dict], groups: list[dict]) -> str:
  metrics = [
    k
    for k in ('val_accuracy', 'test_accuracy', 'test_loss', 'wall_clock_to_target')
    if any(k in s for s in summaries)
  ]
  runs = pd.DataFrame(
    [
      {'run': s['name'], 'seed': s['seed'], 'status': s['status']}
      | {m: '' if s.get(m) is None else s[m] for m in metrics}
      for s in summaries
    ]
  )
  text = runs.to_markdown(index=False, floatfmt='.4f') + '\n'
  if groups:  # the groups this invocation ran
    timing = pd.DataFrame(groups)[['runs', 'status', 'compile_seconds', 'seconds']]
    timing.columns = ['runs', 'status', 'compile + first chunk (s)', 'total (s)']
    text += (
      '\n'
      + timing.rename_axis('group').reset_index().to_markdown(index=False, floatfmt='.1f')
      + '\n'
    )
  return text


def outcome(summary: Mapping[str, Any]) -> tuple[int, str]:
  """(number of runs that diverged, the sweep's last line)."""
  runs = summary.get('runs') or []
  bad = [r for r in runs if r['status'].startswith('diverged')]
  stopped = [r for r in runs if r['status'].startswith(('stopped', 'not started'))]
  line = (
    f'sweep: {len(runs)} runs, {len(runs) - len(bad) - len(stopped)} completed, {len(bad)} diverged'
  )
  if stopped:
    line += f', {len(stopped)} stopped (stop_after_steps; the same command continues)'
  if bad:
    shown = ', '.join(f'{r["name"]} ({r["status"]})' for r in bad[:5])
    line += f': {shown}' + (f' and {len(bad) - 5} more' if len(bad) > 5 else '')
  return len(bad), line
