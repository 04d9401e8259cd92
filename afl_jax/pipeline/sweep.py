"""Sweeps declared in ``config.sweep``: a grid of runs, as few compiles as the grid allows.

``config.sweep`` maps config fields to lists of values; the grid is their cartesian
product. ConfigDict keys cannot hold dots, so fields nest::

  c.sweep = {'hparams': {'client_lr': [0.01, 0.03, 0.1], 'server_lr': [0.5, 1.0]},
             'seed': [0, 1, 2]}         # 18 runs

Every grid point is built by :func:`afl_jax.pipeline.build.build` (so it is
validated like a single run). Points are then grouped: within a group, float
hyperparameters are traced (one value per replica) and everything that only changes
*values* — the seed, hence the data split, the schedule and the init — is stacked
on the replica axis (:mod:`afl_jax.core.replicas`); any other swept field (window
size, compressor kind, model, batch size...) splits the grid into groups, one
compile each. Outputs under ``workdir``:

* ``<run-name>/metrics.jsonl`` per grid point (same records as a single run);
* ``summary.json`` (one record per run: swept values, final and best metrics) and
  ``summary.md`` (a table, the groups and their compile times);
* ``plot.png`` (test accuracy of every run).

:mod:`afl_jax.pipeline.tuning` reads ``summary.json`` records to select settings.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax
import ml_collections
import numpy as np

from afl_jax import algorithms
from afl_jax.core import replicas
from afl_jax.errors import ConfigError
from afl_jax.pipeline import metrics_io, plotting
from afl_jax.sweep import simulator as sweep_simulator

# The module (``afl_jax.pipeline.build`` the attribute is the function build()).
build_lib = importlib.import_module('afl_jax.pipeline.build')

# Fields that change only values, never the compiled program: stacked on the replica axis.
REPLICA_FIELDS = ('seed',)
# Float hyperparameters that set a shape (Top-k's k = fraction * d): one value per group.
STRUCTURAL_HPARAMS = ('fraction',)


def flatten(sweep: Any, prefix: str = '') -> dict[str, list]:
  """Nested ``config.sweep`` -> ``{'hparams.client_lr': [...], 'seed': [...]}``."""
  out: dict[str, list] = {}
  for k, v in sweep.items():
    name = f'{prefix}{k}'
    if isinstance(v, Mapping | ml_collections.ConfigDict):
      out.update(flatten(v, name + '.'))
    else:
      out[name] = list(v) if isinstance(v, list | tuple) else [v]
  return out


def _get(c: ml_collections.ConfigDict, field: str) -> Any:
  node = c
  for part in field.split('.'):
    node = node[part]
  return node


def _set(c: ml_collections.ConfigDict, field: str, value: Any) -> None:
  *path, last = field.split('.')
  node = c
  for part in path:
    node = node[part]
  node[last] = value


def validate_section(c: ml_collections.ConfigDict) -> None:
  """``config.sweep``: every field exists and has a non-empty list of values."""
  if not c.get('sweep'):
    return
  hparams = (
    set(algorithms.hyperparameters(c.algorithm)) if c.algorithm in algorithms.names() else set()
  )
  for field, values in flatten(c.sweep).items():
    if not values:
      raise ConfigError(f'config.sweep.{field}=[] is invalid: give at least one value.')
    if field.startswith('hparams.'):
      if hparams and field[len('hparams.') :] not in hparams:
        raise ConfigError(
          f'config.sweep.{field} is invalid: {c.algorithm!r} has no hyperparameter '
          f'{field[len("hparams.") :]!r}; valid: {sorted(hparams)}.'
        )
      continue
    try:
      _get(c, field)
    except (KeyError, AttributeError):
      raise ConfigError(
        f'config.sweep.{field} is invalid: config has no field {field!r}.'
      ) from None
    if field == 'sweep' or field.startswith('sweep.'):
      raise ConfigError('config.sweep cannot sweep itself.')


def grid(config: ml_collections.ConfigDict) -> list[dict[str, Any]]:
  """The grid points of ``config.sweep``: cartesian product, in declaration order."""
  axes = flatten(config.sweep)
  return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


def run_name(point: Mapping[str, Any]) -> str:
  """A directory name for a grid point, e.g. ``client_lr=0.1,seed=0``."""
  parts = [f'{k.rsplit(".", 1)[-1]}={v}' for k, v in point.items()]
  return ','.join(parts).replace('/', '_').replace(' ', '') or 'run'


def point_config(
  config: ml_collections.ConfigDict, point: Mapping[str, Any]
) -> ml_collections.ConfigDict:
  """``config`` with the grid point applied and no sweep."""
  c = ml_collections.ConfigDict(config.to_dict())
  c.sweep = ml_collections.ConfigDict()
  for field, value in point.items():
    if field.startswith('hparams.') and field[len('hparams.') :] not in c.hparams:
      c.hparams[field[len('hparams.') :]] = value
    else:
      _set(c, field, value)
  return c


def traced_fields(config: ml_collections.ConfigDict) -> list[str]:
  """Swept float hyperparameters (traced within a group)."""
  defaults = algorithms.hyperparameters(config.algorithm)
  out = []
  for field, values in flatten(config.sweep).items():
    name = field[len('hparams.') :] if field.startswith('hparams.') else None
    if name is None or name in STRUCTURAL_HPARAMS:
      continue
    default = defaults.get(name)
    floats = all(isinstance(v, float | int) and not isinstance(v, bool) for v in values)
    if floats and (isinstance(default, float) or default is None):
      out.append(field)
  return out


def group_key(point: Mapping[str, Any], traced: Iterable[str]) -> str:
  """Points with the same key share one compile."""
  skip = set(traced) | set(REPLICA_FIELDS)
  return json.dumps({k: v for k, v in point.items() if k not in skip}, sort_keys=True, default=str)


def _context_key(run: build_lib.Run) -> str:
  """The run context the factory sees, except the model's apply_fn (same model = same fn)."""
  parts = []
  for field in algorithms.registry.context(run.config.algorithm):
    if field == 'apply_fn':
      continue
    if field == 'client_sizes' and run.config.hparams.get('weighting') == 'uniform':
      continue  # read only by weighting='examples'
    value = getattr(run.info, field)
    arr = np.asarray(value) if value is not None else None
    parts.append(f'{field}:{None if arr is None else hash(arr.tobytes())}')
  return ';'.join(parts)


def _factory(run: build_lib.Run) -> Callable[..., Any]:
  """Builds the algorithm like ``build.build_algorithm`` (compressor from config included)."""
  c = run.config
  compressor = build_lib.build_compressor(c)

  def factory(**hparams):
    alg = algorithms.get(c.algorithm, run=run.info, **hparams)
    return alg if compressor is None else alg._replace(compressor=compressor)

  return factory


def _run_group(points, runs, traced, workdir, log) -> tuple[list[dict], dict]:
  """One compile for ``runs``; writes each run's metrics; returns their summaries."""
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
  t0 = time.time()
  sim = sweep_simulator(
    c.algorithm,
    problems if r > 1 else problems[0],
    [run.schedule for run in runs],
    r,
    chunk_size=c.eval_every,
    factory=_factory(first),
    **build_lib.engine_options(c, sweep=True),
    **static,
    **per_replica,
  )
  keys = jax.random.wrap_key_data(np.stack([jax.random.key_data(run.key) for run in runs]))
  params0 = replicas.stack_trees([run.params0 for run in runs])
  state = sim.init(params0, keys)
  writers, records = [], [[] for _ in runs]
  for point in points:
    d = os.path.join(workdir, run_name(point))
    if os.path.exists(os.path.join(d, metrics_io.METRICS_FILE)):
      os.remove(os.path.join(d, metrics_io.METRICS_FILE))
    writers.append(metrics_io.JsonlWriter(d))
  params = sim.params(state)
  bits = np.zeros((r, 2), np.float64)  # cumulative bits up, down per replica (as loop.py)
  for i, run in enumerate(runs):
    rec = {
      'step': 0,
      'wall_clock': 0.0,
      'bytes_up': 0.0,
      'bytes_down': 0.0,
      **run.evaluator(jax.tree.map(lambda a: a[i], params)),
    }
    records[i].append(rec)
    writers[i].write_scalars(0, {k: v for k, v in rec.items() if k != 'step'})
  compile_s, first_chunk = None, True
  while (pos := sim.position(state)) < sim.num_steps:
    state, out = sim.run_chunk(state, keys)
    if first_chunk:
      compile_s, first_chunk = time.time() - t0, False
    params = sim.params(state)
    n = out['metrics']['arrivals'].shape[1]
    for i, run in enumerate(runs):
      end = min(pos + n, run.schedule.num_steps)
      if end <= records[i][-1]['step']:
        continue
      m = {k: np.asarray(v[i, : end - pos]) for k, v in out['metrics'].items()}
      for j, k in enumerate(('bits_up', 'bits_down')):
        if k in m:
          bits[i, j] += m[k].astype(np.float64).sum()
      rule = {
        k.replace('/', '_'): float(np.mean(v))
        for k, v in m.items()
        if k.startswith(('client/', 'server/'))
      }
      rec = {
        'step': end,
        'wall_clock': float(run.schedule.wall_clock[end - 1]),
        'bytes_up': float(bits[i, 0] / 8),
        'bytes_down': float(bits[i, 1] / 8),
        **rule,
        **run.evaluator(jax.tree.map(lambda a: a[i], params)),
      }
      records[i].append(rec)
      writers[i].write_scalars(end, {k: v for k, v in rec.items() if k != 'step'})
  for w in writers:
    w.close()
  seconds = time.time() - t0
  log(f'group of {r} runs: compile + first chunk {compile_s:.1f}s, total {seconds:.1f}s')
  summaries = []
  for point, run, recs in zip(points, runs, records):
    final = recs[-1]
    s = {
      'name': run_name(point),
      'method': c.algorithm,
      'seed': int(run.config.seed),
      'hparams': {k: v for k, v in point.items() if k != 'seed'},
      'steps': final['step'],
      **{k: v for k, v in final.items() if k.endswith(('accuracy', 'loss'))},
      'bytes_up': final['bytes_up'],
      'bytes_down': final['bytes_down'],
    }
    if 'val_accuracy' in recs[-1]:
      s['best_val_accuracy'] = max(x['val_accuracy'] for x in recs)
    target = float(run.config.get('target_accuracy', 0.0) or 0.0)
    if target > 0:
      key = 'val_accuracy' if 'val_accuracy' in final else 'test_accuracy'
      hit = next((x for x in recs if x.get(key, 0) >= target), None)
      s['time_to_target'] = hit['wall_clock'] if hit else float('inf')
    summaries.append(s)
  info = {'runs': r, 'compile_seconds': compile_s, 'seconds': seconds, 'mode': sim.mode}
  return summaries, {run_name(p): recs for p, recs in zip(points, records)} | {'_group': info}


def _markdown(summaries: list[dict], groups: list[dict]) -> str:
  metrics = [
    k
    for k in ('val_accuracy', 'test_accuracy', 'test_loss', 'time_to_target')
    if any(k in s for s in summaries)
  ]
  head = '| run | seed | ' + ' | '.join(metrics) + ' |'
  lines = [head, '|' + '---|' * (2 + len(metrics))]
  for s in summaries:
    vals = ' | '.join(
      f'{s[m]:.4f}' if isinstance(s.get(m), float) else str(s.get(m, '')) for m in metrics
    )
    lines.append(f'| {s["name"]} | {s["seed"]} | {vals} |')
  lines += [
    '',
    '| group | runs | mode | compile + first chunk (s) | total (s) |',
    '|---|---|---|---|---|',
  ]
  for i, g in enumerate(groups):
    lines.append(
      f'| {i} | {g["runs"]} | {g["mode"]} | {g["compile_seconds"]:.1f} | {g["seconds"]:.1f} |'
    )
  return '\n'.join(lines) + '\n'


def train_sweep(
  config: ml_collections.ConfigDict, workdir: str, log: Callable[[str], None] = print
) -> dict[str, Any]:
  """Run the grid of ``config.sweep``; returns ``{'runs': [summary per run], 'groups': [...]}``.

  Raises:
    ConfigError (and the other UserErrors of ``build``): a bad field of any grid
      point, before anything is compiled.
  """
  validate_section(config)
  points = grid(config)
  traced = traced_fields(config)
  groups: dict[str, list[int]] = {}
  for i, p in enumerate(points):
    groups.setdefault(group_key(p, traced), []).append(i)
  # Build every point first: a bad grid point fails before any compile.
  runs = [build_lib.build(point_config(config, p)) for p in points]
  split: list[list[int]] = []
  for members in groups.values():  # the run context the factory sees must match, too
    by_ctx: dict[str, list[int]] = {}
    for i in members:
      by_ctx.setdefault(_context_key(runs[i]), []).append(i)
    split.extend(by_ctx.values())
  log(f'sweep: {len(points)} runs in {len(split)} group(s), traced: {traced or "none"}')
  os.makedirs(workdir, exist_ok=True)
  summaries, group_info, curves = [None] * len(points), [], {}
  for members in split:
    s, recs = _run_group(
      [points[i] for i in members], [runs[i] for i in members], traced, workdir, log
    )
    group_info.append(recs.pop('_group'))
    curves.update(recs)
    for i, one in zip(members, s):
      summaries[i] = one
  out = {'runs': summaries, 'groups': group_info, 'traced': traced}
  with open(os.path.join(workdir, 'summary.json'), 'w') as f:
    json.dump(out, f, indent=2, default=float)
  with open(os.path.join(workdir, 'summary.md'), 'w') as f:
    f.write(_markdown(summaries, group_info))
  plotting.plot_runs(curves, os.path.join(workdir, 'plot.png'), title=f'sweep: {config.algorithm}')
  return out


__all__ = ['flatten', 'grid', 'point_config', 'run_name', 'train_sweep', 'validate_section']
