"""Sweeps declared in ``config.sweep`` (``{'hparams': {'client_lr': [0.01, 0.1]}}``), each point
built as a single run; points differing only in traced values and seed share a compile."""

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
from afl_jax.core import memory
from afl_jax.core.memory import format_bytes
from afl_jax.core.simulator import is_traced, stack_trees
from afl_jax.errors import ConfigError
from afl_jax.pipeline import build as build_lib
from afl_jax.pipeline import checkpoint, loop, metrics_io, plotting, processes, sizes
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import record as record_lib
from afl_jax.pipeline import workdir as workdir_lib

_MAPPING = (Mapping, ml_collections.ConfigDict)
REPLICA_FIELDS = ('seed',)  # change only values, never the program: stacked on the replica axis
GROUPS_DIR = 'groups'


def sweep_axes(sweep: Any, prefix: str = '') -> dict[str, list]:
  """Nested ``config.sweep`` -> ``{'hparams.client_lr': [...], 'seed': [...]}``."""
  out: dict[str, list] = {}
  for k, v in sweep.items():
    name = f'{prefix}{k}'
    if isinstance(v, _MAPPING):
      out.update(sweep_axes(v, name + '.'))
    else:
      out[name] = list(v) if isinstance(v, list | tuple) else [v]
  return out


def algorithm_entry(entry: Any, field: str = 'sweep.algorithm') -> tuple[str, dict[str, Any]]:
  """An entry (a name, or a mapping with a ``name``) as (name, settings)."""
  if isinstance(entry, str):
    return entry, {}
  if isinstance(entry, _MAPPING) and isinstance(entry.get('name'), str):
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


def _bad(field: str, why: str) -> ConfigError:
  return ConfigError(f'config.sweep.{field} is invalid: {why}', field=f'sweep.{field}')


def validate_sweep(c: ml_collections.ConfigDict) -> None:
  """Every field of ``config.sweep`` exists with values, each checked as a single run's."""
  if not c.get('sweep'):
    return
  axes, facts = sweep_axes(c.sweep), {'num_clients': c.num_clients}
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
        if schedule is not None and not isinstance(schedule, _MAPPING):
          why = "'schedule' must be a mapping of schedule settings."
          raise ConfigError.invalid('sweep.algorithm', entry, why)
        if schedule is not None:
          kind = schedule.get('kind', c.schedule.kind)
          takes = schedules.settings(kind) if kind in schedules.SCHEDULES else {}
          settings = {k: v for k, v in c.schedule.items() if k in takes} | dict(schedule)
          settings = {k: v for k, v in settings.items() if k not in ('kind', 'seed')}
          schedules.SCHEDULES.bind(kind, settings, facts=facts)
      names.append(name)
  for field, keep in config_lib.SECTION_FIELDS.items():  # a mapping with a 'kind'
    for entry in axes.get(field, ()):
      if not (isinstance(entry, _MAPPING) and isinstance(entry.get('kind'), str)):
        why = "each entry must be a mapping {'kind': KIND, SETTING: VALUE, ...}."
        raise ConfigError.invalid(f'sweep.{field}', entry, why)
      kind = entry['kind']
      given = {k: v for k, v in dict(entry).items() if k not in ('kind', *keep)}
      with _entry(field, entry):
        if field == 'schedule':
          schedules.SCHEDULES.bind(kind, given, facts=facts)
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
          raise _bad(field, f'{name!r} has no {what} {arg!r}; valid: {sorted(takes)}.')
        for value in values:  # each value as a single run's would be
          problem = registry.violation(name, arg, value)
          if problem is not None:
            why = f'the value {value!r} {problem}.'
            raise ConfigError.invalid(f'sweep.{field}', list(values), why)
    elif section == 'sweep':
      raise ConfigError('config.sweep cannot sweep itself.', field='sweep')
    elif not field.startswith(('schedule.', 'compressor.')):
      try:
        config_path.get_value(field, c)
      except (KeyError, AttributeError):
        raise _bad(field, f'config has no field {field!r}.') from None


_ENTRIES = ('algorithm', *config_lib.NAMED, *config_lib.SECTION_FIELDS)


def _show(value: Any) -> str:
  """A swept value in a run name: an entry as ``fadas(server_lr=0.0001)``."""
  if not isinstance(value, _MAPPING):
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
  """``config`` with the grid point applied and no sweep (an entry replaces its section but
  its ``seed``/``error_feedback``)."""
  c = ml_collections.ConfigDict(config.to_dict())
  c.sweep = ml_collections.ConfigDict()
  if 'algorithm' in point:
    c.algorithm, given = algorithm_entry(point['algorithm'])
    schedule = given.pop('schedule', None)  # the entry's own schedule settings
    c.hparams = ml_collections.ConfigDict(given)
    if isinstance(schedule, _MAPPING):
      c.schedule = ml_collections.ConfigDict(c.schedule.to_dict() | dict(schedule))
  for field, registry in config_lib.NAMED.items():
    if field in point:
      c[field], given = algorithm_entry(point[field], f'sweep.{field}')
      c[registry.section] = ml_collections.ConfigDict(given)
  for field in config_lib.SECTION_FIELDS:
    if isinstance(point.get(field), _MAPPING):
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
  """The grid points of ``config.sweep``; ConfigError for a value the run does not read or
  two points that are one run."""
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
        why = (
          f'the run {run_name(p)} does not read {field} ({value!r} resolves to {got!r}: '
          'another field decides); remove the axis or sweep what the run reads.'
        )
        raise _bad(field, why)
    key = json.dumps(record_lib.computed(c), sort_keys=True)
    if key in seen:
      differ = [f for f in p if config_lib.plain(p[f]) != config_lib.plain(seen[key][f])]
      why = f'{", ".join(differ)} change nothing there' if differ else 'a value given twice'
      raise ConfigError(
        f'config.sweep is invalid: grid points {run_name(seen[key])!r} and {run_name(p)!r} are '
        f'the same run once resolved ({why}); remove the duplicate value.',
        field='sweep',
      )
    seen[key] = p
  return declared


def traced_fields(config: ml_collections.ConfigDict) -> list[str]:
  """Swept hyperparameters traced within a group (for every algorithm of the grid)."""
  axes = sweep_axes(config.sweep)
  names = {algorithm_entry(e)[0] for e in axes.get('algorithm', [config.algorithm])}
  defaults = [algorithms.settings(n) for n in names if n in algorithms.ALGORITHMS]
  return [
    field
    for field, values in axes.items()
    if field.startswith('hparams.')
    and all(is_traced(k := field[len('hparams.') :], d.get(k), values) for d in defaults)
  ]


def group_key(
  point: Mapping[str, Any], traced: Iterable[str], run: build_lib.Run | None = None
) -> str:
  """Points of one key share a compile: the same values but traced ones and the seed, and the
  same run context (but the model's apply)."""
  skip = set(traced) | set(REPLICA_FIELDS)
  context = [
    (f, record_lib._sha(np.asarray(getattr(run.info, f))))
    for f in (algorithms.ALGORITHMS.context(run.recipe.name) if run is not None else ())
    if f != 'apply_fn' and getattr(run.info, f) is not None
  ]
  kept = {k: v for k, v in point.items() if k not in skip}
  return json.dumps([kept, context], sort_keys=True, default=str)


def _padded(engine: dict[str, Any]) -> dict[str, Any]:
  return engine | {'local_step_buckets': engine['local_step_buckets'] or 0}


def _group_sim(runs, traced, limit: int | None = None) -> tuple[Any, Any, Any]:
  """(simulator, keys, stacked params0) of one group (nothing compiled)."""
  first, names = runs[0].recipe, [f[len('hparams.') :] for f in traced]
  static = {k: v for k, v in first.hparams.items() if k not in names}
  per_replica = {k: [float(run.recipe.hparams[k]) for run in runs] for k in names}
  problems = [
    run.problem.replace(loss_fn=runs[0].problem.loss_fn, sample_fn=runs[0].problem.sample_fn)
    for run in runs
  ]
  engine = _padded(runs[0].engine)
  with build_lib.engine_refusal(engine):
    sim = sweep_simulator(
      first.name, problems if len(runs) > 1 else problems[0], [run.schedule for run in runs],
      len(runs), chunk_size=runs[0].cadence.eval_every, factory=first.make,
      memory_limit_bytes=limit, **engine, **static, **per_replica,
    )  # fmt: skip
  keys = jax.random.wrap_key_data(np.stack([jax.random.key_data(run.key) for run in runs]))
  return sim, keys, stack_trees([run.params0 for run in runs])


def run_bytes(run: build_lib.Run) -> int:
  """Host bytes one built grid point holds until the sweep ends (data, schedule, problem)."""
  s = run.schedule
  arrays = [a for a in run.data if isinstance(a, np.ndarray)]
  arrays += [s.client_ids, s.start_step, s.local_steps, s.mask, s.wall_clock]
  arrays += jax.tree.leaves((run.problem, run.params0, run.info.unlabeled_x))
  return int(sum(x.nbytes if hasattr(x, 'nbytes') else np.asarray(x).nbytes for x in arrays))


def _duration(seconds: float) -> str:
  if seconds < 120:
    return f'{seconds:.0f} s'
  return f'{seconds / 60:.0f} min' if seconds < 7200 else f'{seconds / 3600:.1f} h'


def plan(config, first: build_lib.Run) -> dict[str, Any]:
  """The grid's host bytes from its first point; ConfigError when they do not fit."""
  axes = sweep_axes(config.sweep)
  n, per = math.prod(len(v) for v in axes.values()), run_bytes(first)
  limit = sizes.host_limit()
  if limit is not None and n * per > limit:
    shown = ' x '.join(f'{len(v)} {k}' for k, v in sorted(axes.items(), key=lambda kv: -len(kv[1])))
    raise ConfigError(
      f'config.sweep is invalid: its grid has {n:,} runs ({shown}), about '
      f'{format_bytes(n * per)} on the host ({format_bytes(per)} per run) but the limit is '
      f'{format_bytes(limit)}; at most {max(limit // max(per, 1), 0):,} runs fit: shorten the '
      'longest axes or split the grid.',
      field='sweep',
    )
  return {'runs': n, 'bytes_per_run': per, 'host_bytes': n * per}


def _fit_groups(groups, build, limit: int | None, log, fields) -> list[tuple[list[int], Any]]:
  """Each group's simulator (``build(members)``), split until its analytic memory fits."""
  out, usable = [], memory.SAFETY * (limit or 0)
  total = lambda group: group[0].estimate(group[2], group[1])  # noqa: E731
  for members in groups:
    group = build(members)
    report, r = total(group), len(members)
    if limit is None or report['total'] <= usable:
      out.append((members, group))
      continue
    one = total(build(members[:1]))
    if one['total'] > usable:
      sizes.check_memory(one, limit, fields)
    per = max((report['total'] - one['total']) / max(r - 1, 1), 1.0)
    fit = max(int((usable - (one['total'] - per)) // per), 1)
    while fit > 1 and total(build(members[:fit]))['total'] > usable:  # the linear model can
      fit -= max(fit // 20, 1)  # miss by a few MB: the group's own estimate decides
    chunks = [members[i : i + fit] for i in range(0, r, fit)]
    log(
      f'sweep: a group of {r} runs needs about {format_bytes(report["total"])} on the devices, '
      f'above {memory.SAFETY:.0%} of {format_bytes(limit)}: split into {len(chunks)} groups of '
      f'<= {fit} runs (one compile each)'
    )
    out.extend((chunk, build(chunk)) for chunk in chunks)
  return out


def train_sweep(
  config: ml_collections.ConfigDict,
  workdir: str,
  log: Callable[[str], None] = print,
  *,
  memory_limit_bytes: int | None = None,
  resume: bool = True,
) -> dict[str, Any]:
  """Run the grid of ``config.sweep``; returns what ``summary.json`` holds. Every process
  calls it; process 0 holds the workdir and writes (docs/distributed.md)."""
  validate_sweep(config)
  writes = processes.is_writer()
  kept = (
    "the runs' metrics so far are in their <run>/metrics.jsonl; free space and run the same "
    'command to continue'
  )
  with loop.holding(workdir, 'sweep', {'doing': 'running the sweep'}, lambda path: kept) as path:
    return _train_sweep(
      config, path, log if writes else lambda *_: None, memory_limit_bytes, resume
    )


def group_limit() -> int | None:
  """The device memory a group may use: a fact of the machine (never what is free), so a
  config splits into the same groups; on CPU the total RAM / CPU_STATE_FACTOR; the least of
  all processes."""
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
  axes, traced = sweep_axes(config.sweep), traced_fields(config)

  def build_points() -> tuple:
    with build_lib.reusing_data():  # every point is built before the first compile
      first = build_lib.build_point(point_config(config, {k: v[0] for k, v in axes.items()}))
      est = plan(config, first)  # the grid's size, before it is listed
      points = grid(config)
      runs = [first] + [build_lib.build_point(point_config(config, p)) for p in points[1:]]
    return est, points, runs

  est, points, runs = processes.agreed(build_points, 'building the grid')
  first, names = runs[0], [run_name(p) for p in points]
  dirs = [os.path.join(workdir, n) for n in names]
  limit = group_limit() if limit is None else limit
  keyed: dict[str, list[int]] = {}  # every point, finished or not: a run's group is its program
  for i, p in enumerate(points):
    keyed.setdefault(group_key(p, traced, runs[i]), []).append(i)
  build = lambda ms: _group_sim([runs[i] for i in ms], traced, limit)  # noqa: E731
  fitted = processes.agreed(
    lambda: _fit_groups(keyed.values(), build, limit, log, first.memory_fields),
    'fitting the groups to the memory',
  )
  groups = []  # each group a Program: checkpoints in groups/<digest of identities and program>
  for members, built in fitted:
    ids = record_lib.digest_of(runs[i].identity['digest'] for i in members)
    gid = record_lib._sha(ids, json.dumps(record_lib.program(built[0])))[:16]
    folder = os.path.join(workdir, GROUPS_DIR, gid)
    groups.append(
      loop.Program(*built, [runs[i] for i in members], [dirs[i] for i in members], folder, gid)
    )

  def finished(g: loop.Program) -> bool:
    steps = [(d, r.schedule.num_steps, r.cadence.eval_every) for d, r in zip(g.dirs, g.runs)]
    return resume and all(checkpoint.finished(*s) for s in steps)

  done = processes.on_writer(lambda: [finished(g) for g in groups], 'the finished runs')
  todo_groups = [g for g, f in zip(groups, done) if not f]
  todo = sum(len(g.runs) for g in todo_groups)
  work = [sizes.check_work(g.runs[0].work_fields, g.sim, g.runs[0].params0) for g in todo_groups]
  flops = sum(w['total_flops'] for w in work)  # each group's work checked, from its simulator

  def prepare() -> list[int | None]:  # every folder checked before anything is written
    kept = os.path.join(workdir, GROUPS_DIR)
    if not resume:
      for d in dirs:
        loop.start_over(d)
      shutil.rmtree(kept, ignore_errors=True)
    for g in groups:
      g.check()
    for old in os.listdir(kept) if os.path.isdir(kept) else ():  # other groupings' go
      if old not in {g.binding for g in todo_groups}:
        shutil.rmtree(os.path.join(kept, old))
    return [g.begin() for g in todo_groups]

  starts = processes.on_writer(prepare, 'resume')
  rate = sizes.ASSUMED_FLOPS['cpu' if jax.default_backend() == 'cpu' else 'other']
  log(
    f'sweep: {len(points)} runs ({len(points) - todo} finished earlier, reused) in '
    f'{len(todo_groups)} group(s), traced: {traced or "none"}; built runs about '
    f'{format_bytes(est["host_bytes"])} on the host, client training about {flops:.2g} '
    f'FLOP (~{_duration(flops / rate)} at an assumed {rate:.0e} FLOP/s)'
    + (f'; {jax.process_count()} processes, {jax.device_count()} devices' if
       jax.process_count() > 1 else '')
  )  # fmt: skip
  infos, stopped = [], False
  write = lambda complete: _summarize(workdir, points, names, infos, traced, complete)  # noqa: E731
  if processes.is_writer():
    write(False)
  try:
    for k, (g, start) in enumerate(zip(todo_groups, starts)):
      infos.append(_run_group(k, g, start, log))
      stopped |= infos[-1]['status'] == 'stopped'
      n, spent = sum(len(g.runs) for g in todo_groups[: k + 1]), time.time() - t_start
      if n < todo:
        left = _duration(spent / n * (todo - n))
        log(f'sweep: {n}/{todo} runs done in {_duration(spent)}; about {left} left')
  except KeyboardInterrupt:
    if processes.is_writer():
      write(False)
    how = 'from the last checkpoint' if first.cadence.checkpoint_every else '(finished groups kept)'
    raise workdir_lib.Interrupted(
      f'interrupted (Ctrl-C) in group {len(infos) + 1} of {len(todo_groups)}; the metrics so far '
      f'are in {workdir_lib.show(workdir)}/<run>/metrics.jsonl; the same command continues {how}'
    ) from None
  processes.barrier('afl_jax sweep records')  # every run's records are on disk: all read them
  out = write(not stopped)
  if processes.is_writer():
    records = {n: metrics_io.read_metrics(os.path.join(workdir, n)) for n in names}
    workdir_lib.write_text(os.path.join(workdir, 'summary.md'), _markdown(out['runs'], infos))
    plotting.plot_runs(
      records, os.path.join(workdir, 'plot.png'), title=f'sweep: {first.recipe.name}'
    )
  processes.barrier('afl_jax sweep written')
  log(outcome(out)[1])
  return out


def _run_group(k: int, g: loop.Program, start: int | None, log) -> dict:
  t0, chunk_ends = time.time(), []
  if start is not None:
    log(f'group {k}: resumed from its checkpoint at server step {start}')
  state, status = g.run(start, lambda tracks, end: chunk_ends.append(time.time()))
  compile_s = chunk_ends[0] - t0 if chunk_ends else None
  seconds = time.time() - t0
  log(
    f'group {k} of {len(g.runs)} runs: compile + first chunk {compile_s or 0:.1f}s, total '
    f'{seconds:.1f}s; simulation state about {format_bytes(g.sim.memory["total"])} (analytic)'
    + (f'; stopped at server step {g.sim.position(state)} (stop_after_steps)'
       if status == 'stopped' else '')
  )  # fmt: skip
  if status == 'completed':  # finished: the records say so, the checkpoints are not needed
    processes.barrier('afl_jax group done')  # no process reads them any more
    if processes.is_writer():
      shutil.rmtree(g.checkpointer().directory, ignore_errors=True)
  return {'runs': len(g.runs), 'status': status, 'mode': g.sim.mode, 'compile_seconds': compile_s,
          'seconds': seconds}  # fmt: skip


def _summarize(workdir, points, names, infos, traced, complete: bool) -> dict:
  runs = []
  for p, n in zip(points, names):
    rec = record_lib.read(os.path.join(workdir, n))
    swept = {k: v for k, v in p.items() if k != 'seed'}
    runs.append({'name': n, 'hparams': swept, 'config': rec.config} | rec.summary())
  out = record_lib.jsonable({'runs': runs, 'groups': infos, 'traced': traced, 'complete': complete})
  if processes.is_writer():
    text = json.dumps(out, indent=2, allow_nan=False) + '\n'
    workdir_lib.write_text(os.path.join(workdir, record_lib.SUMMARY_FILE), text)
  return out


def _markdown(summaries: list[dict], groups: list[dict]) -> str:
  names = ('val_accuracy', 'test_accuracy', 'test_loss', 'wall_clock_to_target')
  metrics = [k for k in names if any(k in s for s in summaries)]
  runs = pd.DataFrame(
    {'run': s['name'], 'seed': s['seed'], 'status': s['status']}
    | {m: '' if s.get(m) is None else s[m] for m in metrics}
    for s in summaries
  )
  text = runs.to_markdown(index=False, floatfmt='.4f') + '\n'
  if groups:  # the groups this invocation ran
    timing = pd.DataFrame(groups)[['runs', 'status', 'compile_seconds', 'seconds']]
    timing.columns = ['runs', 'status', 'compile + first chunk (s)', 'total (s)']
    timing = timing.rename_axis('group').reset_index()
    text += '\n' + timing.to_markdown(index=False, floatfmt='.1f') + '\n'
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
