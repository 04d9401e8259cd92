"""Sweeps declared in ``config.sweep``: a grid of runs, as few compiles as the grid allows.

``config.sweep`` maps config fields to lists of values; the grid is their cartesian
product. ConfigDict keys cannot hold dots, so fields nest::

  c.sweep = {'hparams': {'client_lr': [0.01, 0.03, 0.1], 'server_lr': [0.5, 1.0]},
             'seed': [0, 1, 2]}         # 18 runs

A component swept whole: each ``algorithm`` entry, a name or a name with its settings,
replaces the config's ``algorithm`` + ``hparams`` pair (its own defaults for the rest;
``hparams`` axes then sweep within each algorithm)::

  c.sweep = {'algorithm': ['fedbuff', {'name': 'fadas', 'server_lr': 1e-4}],
             'seed': [0, 1, 2]}         # 6 runs, each algorithm with its own values

A ``schedule`` or ``compressor`` axis lists whole entries the same way,
``{'schedule': [{'kind': 'fedbuff'}, {'kind': 'synchronous', 'clients_per_step': 5}]}``.
Two grid points that resolve to the same run are refused (:func:`grid`).

Every grid point is built by :func:`afl_jax.pipeline.build.build_run` (so it is
validated like a single run). Points are then grouped: within a group, float
hyperparameters are traced (one value per replica) and everything that only changes
*values* — the seed, hence the data split, the schedule and the init — is stacked
on the replica axis (:mod:`afl_jax.core.replicas`); any other swept field (window
size, compressor kind, model, batch size...) splits the grid into groups, one
compile each. Outputs under ``workdir``:

* ``<run-name>/metrics.jsonl`` per grid point (same records as a single run),
  ``<run-name>/config.json`` (its resolved config: every value it ran with) and
  ``<run-name>/schedule.npz`` (its schedule, written as a single run's:
  :func:`workdir.write_schedule`; ``afl_jax.schedules.load`` reads it, the ``trace``
  schedule kind replays it);
* ``summary.json`` (strict JSON, one record per run: swept values, its resolved
  ``config``, ``status`` -- ``completed`` or ``stopped: diverged at step S (QUANTITY)``,
  with null accuracies and losses -- and final and best metrics) and ``summary.md`` (a
  table, the groups and their compile times); :func:`outcome` gives the line counting
  diverged runs;
* ``plot.png`` (test accuracy of every run);
* ``sweep.json``: the sweep's resolved config, its grouping, what else decides its
  numbers (data digest, devices, platform: :func:`sweep_groups.identity`), whether every run of it
  finished (``complete``) and a ``status``; ``summary.json`` is written (whole,
  atomically) only then;
* ``groups/<k>/checkpoints`` while group ``k`` runs (every ``checkpoint_every`` steps)
  and ``groups/<k>/done.json`` once it finished (afl_jax/pipeline/sweep_groups.py).

One writer per workdir (afl_jax/pipeline/workdir.py): the sweep locks its workdir;
a workdir holding a single run, a sweep of another config (the differing fields are
named; a longer ``num_rounds`` is refused: a sweep is not extended), a
``summary.json`` of unknown origin, a damaged ``sweep.json``, or a sweep recorded on
other data, devices or platform is refused before anything is written. Run again into
its workdir, a sweep continues with its recorded grouping: a finished group is not run
again (its runs' records are checked whole and read back), an interrupted one resumes
from its latest intact checkpoint with each run's records truncated to that step (a
gap starts the group over), so the result equals the uninterrupted sweep's bit for
bit. Ctrl-C records the status in ``sweep.json`` and ends as one line
(:class:`workdir.Interrupted`; a checkpoint being saved is finished first).

Sizes are checked before the grid is built (:func:`plan`): the first grid point is
built, its host arrays are measured, and a grid whose runs would not fit in host
memory is refused with one line; a group whose replicas do not fit in the device
memory (the engine's analytic estimate) is split into groups that do, said in the log.

:mod:`afl_jax.reproduction.runs` reads the runs' curves as records to select settings.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax
import ml_collections
import numpy as np
import pandas as pd
from ml_collections.config_flags import config_path

from afl_jax import algorithms
from afl_jax.api import replica_simulator as sweep_simulator
from afl_jax.core import memory, replicas
from afl_jax.core.memory import format_bytes
from afl_jax.errors import ConfigError
from afl_jax.pipeline import build as build_lib
from afl_jax.pipeline import checkpoint, metrics_io, plotting, sizes
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import sweep_groups as groups_lib
from afl_jax.pipeline import workdir as workdir_lib
from afl_jax.pipeline.sweep_groups import outcome, run_summary
from afl_jax.pipeline.sweep_groups import run_group as _run_group

# Fields that change only values, never the compiled program: stacked on the replica axis.
REPLICA_FIELDS = ('seed',)


def grid(config: ml_collections.ConfigDict) -> list[dict[str, Any]]:
  """The grid points of ``config.sweep``: cartesian product, in declaration order.

  Raises:
    ConfigError: two points give the same run (every resolved value equal), before
      anything is built.
  """
  axes = config_lib.sweep_axes(config.sweep)
  points = [dict(zip(axes, values)) for values in itertools.product(*axes.values())]
  seen: dict[str, dict[str, Any]] = {}
  for p in points:
    key = checkpoint.config_json(config_lib.resolve(point_config(config, p)))
    if key in seen:
      raise ConfigError(
        f'config.sweep is invalid: grid points {run_name(seen[key])!r} and {run_name(p)!r} '
        'are the same run (every value equal once resolved); remove the duplicate value.',
        field='sweep',
      )
    seen[key] = p
  return points


def _show(value: Any) -> str:
  """A swept value in a run name: an entry as ``fadas(server_lr=0.0001)``."""
  if not isinstance(value, Mapping | ml_collections.ConfigDict):
    return str(value)
  entry = dict(value)
  name = entry.pop('kind', None) or entry.pop('name', None)
  given = ','.join(f'{k}={v}' for k, v in sorted(entry.items()))
  return f'{name}({given})' if given else str(name)


def run_name(point: Mapping[str, Any]) -> str:
  """A directory name for a grid point, e.g. ``client_lr=0.1,seed=0``."""
  parts = [f'{k.rsplit(".", 1)[-1]}={_show(v)}' for k, v in point.items()]
  return ','.join(parts).replace('/', '_').replace(' ', '') or 'run'


def point_config(
  config: ml_collections.ConfigDict, point: Mapping[str, Any]
) -> ml_collections.ConfigDict:
  """``config`` with the grid point applied and no sweep.

  An ``algorithm`` entry replaces the whole ``algorithm`` + ``hparams`` pair: the run
  gets that algorithm with the settings the entry gives and its own defaults for the
  rest, never the base config's (another algorithm's) values. ``hparams.*`` axes then
  apply within it. A ``model`` / ``dataset`` entry (``'mlp'``, ``{'name': 'mlp',
  'hidden_sizes': [100]}``) replaces ``model`` + ``model_args`` (``dataset`` +
  ``dataset_args``) likewise. A ``schedule`` / ``compressor`` entry (``{'kind': ..., ...}``)
  replaces that section likewise, keeping only its section-level field (the schedule's
  ``seed``, the compressor's ``error_feedback``) unless the entry gives it.
  """
  c = ml_collections.ConfigDict(config.to_dict())
  c.sweep = ml_collections.ConfigDict()
  if 'algorithm' in point:
    c.algorithm, given = config_lib.algorithm_entry(point['algorithm'])
    c.hparams = ml_collections.ConfigDict(given)
  for field, registry in config_lib.NAMED.items():  # a model / dataset entry, likewise
    if field in point:
      c[field], given = config_lib.algorithm_entry(point[field], f'sweep.{field}')
      c[registry.section] = ml_collections.ConfigDict(given)
  for field in config_lib.SECTION_FIELDS:  # a whole schedule / compressor entry
    if isinstance(point.get(field), Mapping | ml_collections.ConfigDict):
      keep = {k: c[field][k] for k in config_lib.SECTION_FIELDS[field] if k in c[field]}
      c[field] = ml_collections.ConfigDict(keep | dict(point[field]))
  for field, value in point.items():
    if field in ('algorithm', *config_lib.SECTION_FIELDS, *config_lib.NAMED):
      continue
    if field.startswith('hparams.') and field[len('hparams.') :] not in c.hparams:
      c.hparams[field[len('hparams.') :]] = value
    else:
      config_path.set_value(field, c, value, accept_new_attributes=True)
  return c


def traced_fields(config: ml_collections.ConfigDict) -> list[str]:
  """Swept hyperparameters traced within a group (:func:`replicas.is_traced` for every
  algorithm of the grid)."""
  axes = config_lib.sweep_axes(config.sweep)
  entries = axes.get('algorithm', [config.algorithm])
  names = {config_lib.algorithm_entry(e)[0] for e in entries}
  defaults = [algorithms.hyperparameters(n) for n in names if n in algorithms.ALGORITHMS]
  return [
    field
    for field, values in axes.items()
    if field.startswith('hparams.')
    and all(replicas.is_traced(k := field[len('hparams.') :], d.get(k), values) for d in defaults)
  ]


def group_key(point: Mapping[str, Any], traced: Iterable[str]) -> str:
  """Points with the same key share one compile (an algorithm entry is part of the key)."""
  skip = set(traced) | set(REPLICA_FIELDS)
  return json.dumps({k: v for k, v in point.items() if k not in skip}, sort_keys=True, default=str)


def _context_key(run: build_lib.Run) -> str:
  """The run context the factory sees, except the model's apply_fn (same model = same fn)."""
  parts = []
  for field in algorithms.registry.context(run.config.algorithm):
    if field == 'apply_fn':
      continue
    value = getattr(run.info, field)
    arr = np.asarray(value) if value is not None else None
    parts.append(f'{field}:{None if arr is None else hash(arr.tobytes())}')
  return ';'.join(parts)


def _group_sim(runs, traced, limit: int | None = None) -> tuple[Any, Any, Any]:
  """(simulator, keys, stacked params0) of one group: nothing compiled or allocated yet."""
  first = runs[0]
  c = first.config
  r = len(runs)
  names = [f[len('hparams.') :] for f in traced]
  static = {k: v for k, v in dict(c.hparams).items() if k not in names}
  per_replica = {k: [float(run.config.hparams[k]) for run in runs] for k in names}
  problems = [
    run.problem.replace(loss_fn=first.problem.loss_fn, sample_fn=first.problem.sample_fn)
    for run in runs
  ]
  sim = sweep_simulator(
    c.algorithm,
    problems if r > 1 else problems[0],
    [run.schedule for run in runs],
    r,
    chunk_size=c.eval_every,
    factory=build_lib.algorithm_factory(c, first.info),
    memory_limit_bytes=limit,
    **build_lib.engine_options(c, sweep=True),
    **static,
    **per_replica,
  )
  keys = jax.random.wrap_key_data(np.stack([jax.random.key_data(run.key) for run in runs]))
  params0 = replicas.stack_trees([run.params0 for run in runs])
  return sim, keys, params0


def _markdown(summaries: list[dict], groups: list[dict]) -> str:
  metrics = [
    k
    for k in ('val_accuracy', 'test_accuracy', 'test_loss', 'wall_clock_to_target')
    if any(k in s for s in summaries)
  ]
  runs = pd.DataFrame(
    [
      {'run': s['name'], 'seed': s['seed'], 'status': s.get('status', 'completed')}
      | {m: '' if s.get(m) is None else s[m] for m in metrics}
      for s in summaries
    ]
  )
  timing = pd.DataFrame(groups)[['runs', 'mode', 'compile_seconds', 'seconds']]
  timing.columns = ['runs', 'mode', 'compile + first chunk (s)', 'total (s)']
  return (
    runs.to_markdown(index=False, floatfmt='.4f')
    + '\n\n'
    + timing.rename_axis('group').reset_index().to_markdown(index=False, floatfmt='.1f')
    + '\n'
  )


# ---- sizes --------------------------------------------------------------------------------
# Assumed throughput of client training for the rough time estimate (the log's measured
# rate replaces it once the first group ran): a few cores' worth of float32 products.
ASSUMED_FLOPS = 1e10


def num_points(config: ml_collections.ConfigDict) -> int:
  """The number of grid points of ``config.sweep`` (without listing them)."""
  return math.prod(len(v) for v in config_lib.sweep_axes(config.sweep).values())


def _nbytes(tree: Any) -> int:
  return int(sum(np.asarray(x).nbytes if not hasattr(x, 'nbytes') else x.nbytes for x in tree))


def run_bytes(run: build_lib.Run) -> int:
  """Host bytes one built grid point holds until the sweep ends (data, schedule, problem)."""
  data = [a for a in run.data if isinstance(a, np.ndarray)]
  sched = [getattr(run.schedule, n) for n in ('client_ids', 'start_step', 'local_steps', 'mask')]
  sched.append(run.schedule.wall_clock)
  leaves = jax.tree.leaves((run.problem, run.params0, run.info.unlabeled_x))
  return _nbytes(data) + _nbytes(sched) + _nbytes(leaves)


def run_flops(run: build_lib.Run) -> float:
  """Rough client-training FLOPs of one run: 6 x params x batch x local steps, summed."""
  from afl_jax import models

  steps = float(np.asarray(run.schedule.local_steps)[np.asarray(run.schedule.mask)].sum())
  return 6.0 * models.count_params(run.params0) * int(run.config.batch_size) * steps


def _duration(seconds: float) -> str:
  if seconds < 120:
    return f'{seconds:.0f} s'
  return f'{seconds / 60:.0f} min' if seconds < 7200 else f'{seconds / 3600:.1f} h'


def plan(
  config: ml_collections.ConfigDict, first: build_lib.Run, *, limit_bytes: int | None = None
) -> dict[str, Any]:
  """The grid's host memory and rough time, from its first point; refuses a grid that cannot fit.

  Every grid point is built before the first compile (so a bad point fails early), and
  the built points are held until the sweep ends: ``runs x run_bytes(first)`` must fit
  in the host limit (:func:`afl_jax.pipeline.sizes.host_limit`).

  Raises:
    ConfigError: ``config.sweep is invalid: ...`` with the estimate, the limit and the
      largest axes to shorten.
  """
  n = num_points(config)
  per = run_bytes(first)
  limit = sizes.host_limit() if limit_bytes is None else limit_bytes
  flops = run_flops(first) * n
  out = {'runs': n, 'bytes_per_run': per, 'host_bytes': n * per, 'flops': flops}
  out['seconds'] = flops / ASSUMED_FLOPS
  if limit is not None and n * per > limit:
    axes = sorted(config_lib.sweep_axes(config.sweep).items(), key=lambda kv: -len(kv[1]))
    shown = ' x '.join(f'{len(v)} {k}' for k, v in axes)
    fit = max(limit // max(per, 1), 0)
    raise ConfigError(
      f'config.sweep is invalid: its grid has {n:,} runs ({shown}), holding about '
      f'{format_bytes(n * per)} on the host ({format_bytes(per)} per run) but the limit is '
      f'{format_bytes(limit)} '
      f'({sizes.HOST_FRACTION:.0%} of the available host memory); at most {fit:,} runs fit: '
      'shorten the longest axes or split the grid into several sweeps.',
      field='sweep',
    )
  return out


def _fit_groups(groups, limit: int | None, log, config) -> list[tuple[list[int], Any]]:
  """Each group's simulator, split into groups whose replicas fit the device memory.

  The engine's analytic estimate of a group of R replicas and of one replica give the
  fixed and the per-replica bytes; a group above the usable memory is cut into groups
  of as many replicas as fit, and one replica that does not fit is refused.
  """
  out = []
  for members, build_group in groups:
    group = build_group(members)
    sim, keys, params0 = group
    report = sim.estimate(params0, keys)
    r = len(members)
    if limit is None or report['total'] <= memory.SAFETY * limit:
      out.append((members, group))
      continue
    one_sim, one_keys, one_params = build_group(members[:1])
    one = one_sim.estimate(one_params, one_keys)
    if one['total'] > memory.SAFETY * limit:  # ConfigError naming the field to lower
      with sizes.memory_guard(config, lambda one=one: one):
        memory.check(one, limit)
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


# ---- the workdir --------------------------------------------------------------------------
SUMMARY_FILES = ('summary.json', 'summary.md', 'plot.png')


# Compared whole (the summary depends on num_rounds and eval_every too) but where the data is
# (its digest is compared instead: sweep_groups.identity) and how often checkpoints are kept.
_FREE_FIELDS = ('data_dir', 'download', 'checkpoint_every')


def _record(config: ml_collections.ConfigDict) -> dict[str, Any]:
  return checkpoint.canonical_config(config_lib.resolve(config))


def _saved(workdir: str) -> dict | None:
  saved = workdir_lib.read_json(os.path.join(workdir, workdir_lib.SWEEP_FILE), strict=False)
  return saved if isinstance(saved, dict) else None


def check_workdir(config: ml_collections.ConfigDict, workdir: str) -> None:
  """Refuse a workdir whose outputs this sweep would overwrite (WorkdirError, one line).

  Refused: a workdir holding a single run, a sweep of a different config (every
  differing field named ``old -> new``; ``num_rounds`` and ``eval_every`` included, as
  they change the summary: a sweep is not extended to more rounds, its replicas would
  not continue exactly as the longer sweep's) or a ``summary.json`` no sweep recorded.
  The same sweep (finished or interrupted) may run again into its own workdir.
  """
  workdir_lib.refuse_other(workdir, 'sweep')
  saved = _saved(workdir)
  if saved is None:
    if os.path.exists(os.path.join(workdir, workdir_lib.SWEEP_FILE)):
      raise workdir_lib.WorkdirError(
        f'{workdir_lib.show(os.path.join(workdir, workdir_lib.SWEEP_FILE))} is not a JSON '
        'object (damaged); move it away to run this sweep again, or choose another --workdir'
      )
    if os.path.exists(os.path.join(workdir, 'summary.json')):
      raise workdir_lib.WorkdirError(
        f'workdir {workdir_lib.show(workdir)} holds a summary.json that no sweep recorded (no '
        f'{workdir_lib.SWEEP_FILE}); a sweep would overwrite it; choose another --workdir'
      )
    return
  old = saved.get('config') if isinstance(saved.get('config'), dict) else {}
  diffs = checkpoint.config_diff(old, _record(config), _FREE_FIELDS, resume=False)
  extend = any(f == 'num_rounds' for f, _, _ in diffs)
  checkpoint.refuse_changed(
    old,
    _record(config),
    workdir_lib.WorkdirError,
    f'workdir {workdir_lib.show(workdir)} holds a sweep with a different config '
    f'({workdir_lib.SWEEP_FILE})',
    (
      'a sweep cannot be extended to more num_rounds (its runs would not continue exactly as '
      'the longer sweep): run it into another --workdir; '
      if extend
      else ''
    )
    + 'its summary.json and plot.png are kept: choose another --workdir',
    _FREE_FIELDS,
    resume=False,
  )


def finished(workdir: str, config: ml_collections.ConfigDict) -> bool:
  """Whether ``workdir`` holds this sweep with every run of its grid finished.

  True only when ``sweep.json`` records the same config as complete, ``summary.json``
  has one record per grid point and every run's ``metrics.jsonl`` exists: an
  interrupted sweep is never reused as finished.
  """
  saved = _saved(workdir)
  if not saved or not saved.get('complete') or not isinstance(saved.get('config'), dict):
    return False
  if checkpoint.config_diff(saved['config'], _record(config), _FREE_FIELDS, resume=False):
    return False
  summary = workdir_lib.read_json(os.path.join(workdir, 'summary.json'), strict=False)
  names = [run_name(p) for p in grid(config)]
  runs = summary.get('runs') if isinstance(summary, dict) else None
  got = [r.get('name') for r in runs or [] if isinstance(r, dict)]
  return sorted(got) == sorted(names) and all(
    os.path.isfile(os.path.join(workdir, n, metrics_io.METRICS_FILE)) for n in names
  )


def train_sweep(
  config: ml_collections.ConfigDict,
  workdir: str,
  log: Callable[[str], None] = print,
  *,
  memory_limit_bytes: int | None = None,
) -> dict[str, Any]:
  """Run the grid of ``config.sweep``; returns ``{'runs': [summary per run], 'groups': [...]}``.

  The result is what ``summary.json`` holds (strict JSON). Run again into its workdir,
  a sweep continues with the grouping recorded in ``sweep.json``: a group that finished
  is not run again (its runs' records are read back), the others resume from their
  checkpoints (``checkpoint_every``), so the result equals an uninterrupted sweep's.
  Each run's ``status`` says whether it diverged (:func:`run_summary`, :func:`outcome`).

  ``memory_limit_bytes``: the device memory a group's analytic state may use (default:
  what the backend reports; on CPU the free host memory divided by
  :data:`afl_jax.core.memory.CPU_STATE_FACTOR`); a group that does not fit is split
  into groups that do.

  Raises:
    ConfigError (and the other UserErrors of ``build_run``): a bad field of any grid
      point, or a grid too large for the host memory, before anything is compiled.
    WorkdirError: the workdir is busy, holds other outputs (:func:`check_workdir`),
      or a write failed for the disk's reason.
    workdir.Interrupted: Ctrl-C; the status is recorded in ``sweep.json`` and the
      message (one line) says what was kept.
  """
  config_lib.validate_sweep(config)
  lock = workdir_lib.acquire(workdir)
  try:
    check_workdir(config, lock.path)
    return _train_sweep(config, lock.path, log, memory_limit_bytes)
  except OSError as e:
    disk = workdir_lib.disk_error(e, lock.path)
    if disk is None:
      raise
    raise workdir_lib.write_error(
      lock.path,
      disk,
      'running the sweep',
      "the finished runs' metrics are in their <run>/metrics.jsonl; the sweep is not marked "
      'finished: free space and run it again',
    ) from None
  finally:
    lock.release()


def _saved_plan(saved: dict | None, config, names: list[str]) -> list[list[int]] | None:
  """The grouping an earlier invocation of this sweep recorded (None: none, or another)."""
  if not saved or not isinstance(saved.get('config'), dict):
    return None
  if checkpoint.config_diff(saved['config'], _record(config), _FREE_FIELDS, resume=False):
    return None
  groups = saved.get('groups')
  index = {n: i for i, n in enumerate(names)}
  if not isinstance(groups, list) or not all(isinstance(g, list) and g for g in groups):
    return None
  flat = [n for g in groups for n in g]
  if sorted(map(str, flat)) != sorted(names):
    return None
  return [[index[n] for n in g] for g in groups]


def _train_sweep(
  config: ml_collections.ConfigDict, workdir: str, log, limit: int | None
) -> dict[str, Any]:
  t_start = time.time()
  axes = config_lib.sweep_axes(config.sweep)  # the first point, before listing the grid:
  first = build_lib.build_run(point_config(config, {k: v[0] for k, v in axes.items()}))
  est = plan(config, first)
  points = grid(config)
  names = [run_name(p) for p in points]
  traced = traced_fields(config)
  # Build every point first: a bad grid point fails before any compile.
  runs = [first] + [build_lib.build_run(point_config(config, p)) for p in points[1:]]
  if limit is None:
    limit = memory.available_bytes()
    if limit is not None and jax.default_backend() == 'cpu':  # the state shares host RAM
      limit = int(limit / memory.CPU_STATE_FACTOR)
  build = lambda ms: _group_sim([runs[i] for i in ms], traced, limit)
  for n in names:  # every run's file can be written: refused before any compute
    workdir_lib.check_dir(os.path.join(workdir, n))
    workdir_lib.check_target(os.path.join(workdir, n, metrics_io.METRICS_FILE))
  ident = groups_lib.identity(first)
  saved = _saved(workdir)
  recorded = _saved_plan(saved, config, names)
  if recorded is not None:  # an earlier invocation's groups: its checkpoints fit them
    groups_lib.refuse_other_identity(saved, ident, workdir)
    fitted = [(members, None) for members in recorded]
    log(f'sweep: continuing the sweep in its workdir ({len(recorded)} group(s) as recorded)')
  else:
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(points):
      groups.setdefault(group_key(p, traced), []).append(i)
    split: list[list[int]] = []
    for members in groups.values():  # the run context the factory sees must match, too
      by_ctx: dict[str, list[int]] = {}
      for i in members:
        by_ctx.setdefault(_context_key(runs[i]), []).append(i)
      split.extend(by_ctx.values())
    fitted = _fit_groups([(m, build) for m in split], limit, log, first.config)
    shutil.rmtree(
      os.path.join(workdir, groups_lib.GROUPS_DIR), ignore_errors=True
    )  # another grouping's
  log(
    f'sweep: {len(points)} runs in {len(fitted)} group(s), traced: {traced or "none"}; '
    f'built runs about {format_bytes(est["host_bytes"])} on the host, client training about '
    f'{est["flops"]:.2g} FLOP (~{_duration(est["seconds"])} at an assumed '
    f'{ASSUMED_FLOPS:.0e} FLOP/s)'
  )
  # Nothing of an earlier invocation may pass for this one's results until it finishes.
  sweep_file = os.path.join(workdir, workdir_lib.SWEEP_FILE)
  record = {
    'format': 2,
    'config': _record(config),
    'runs': len(points),
    'groups': [[names[i] for i in members] for members, _ in fitted],
    'identity': ident,
    'complete': False,
    'status': 'running',
  }
  write_record = lambda: workdir_lib.write_text(
    sweep_file, json.dumps(record, indent=1, sort_keys=True, allow_nan=False) + '\n'
  )
  write_record()
  for name in SUMMARY_FILES:
    if os.path.isfile(os.path.join(workdir, name)):
      os.remove(os.path.join(workdir, name))
  group_info, done = [], 0
  try:
    for k, (members, group) in enumerate(fitted):
      info = _run_group(
        k,
        [names[i] for i in members],
        [runs[i] for i in members],
        (lambda group=group, members=members: group or build(members)),
        workdir,
        log,
      )
      group_info.append(info)
      done += len(members)
      if done < len(points):
        spent = time.time() - t_start
        log(
          f'sweep: {done}/{len(points)} runs done in {_duration(spent)}; about '
          f'{_duration(spent / done * (len(points) - done))} left'
        )
  except KeyboardInterrupt:
    every = int(config.checkpoint_every)
    record['status'] = f'interrupted (Ctrl-C) in group {len(group_info)} of {len(fitted)}'
    write_record()
    raise workdir_lib.Interrupted(
      f'interrupted (Ctrl-C): {done} of {len(points)} runs of the sweep finished; the metrics '
      f'so far are in {workdir_lib.show(workdir)}/<run>/metrics.jsonl; run the same command to '
      + (
        f'continue from the last checkpoint (checkpoint_every={every})'
        if every
        else 'continue (finished groups are kept; set config.checkpoint_every to keep more)'
      )
    ) from None
  records = {n: metrics_io.read_metrics(os.path.join(workdir, n)) for n in names}
  summaries = [
    run_summary(n, p, run, records[n], os.path.join(workdir, n))
    for p, run, n in zip(points, runs, names)
  ]
  out = metrics_io.jsonable({'runs': summaries, 'groups': group_info, 'traced': traced})
  workdir_lib.write_text(
    os.path.join(workdir, 'summary.json'), json.dumps(out, indent=2, allow_nan=False) + '\n'
  )
  workdir_lib.write_text(os.path.join(workdir, 'summary.md'), _markdown(summaries, group_info))
  plotting.plot_runs(records, os.path.join(workdir, 'plot.png'), title=f'sweep: {config.algorithm}')
  diverged, line = outcome(out)
  record['complete'] = True
  record['status'] = f'finished: {len(points)} runs, {diverged} diverged'
  write_record()
  log(line)
  return out


__all__ = [
  'check_workdir',
  'finished',
  'grid',
  'num_points',
  'outcome',
  'plan',
  'point_config',
  'run_name',
  'run_summary',
  'train_sweep',
]
