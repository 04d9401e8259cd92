"""Results as a paper prints them: methods over seeds, with 95% t intervals.

For any set of run folders and sweep folders (:func:`load`), runs are grouped by
method, everything the run was configured with except its seed (:func:`methods`), and
each method gets one row (:func:`table`): the final and best accuracy, and the server
steps, simulated seconds and MB uploaded to a target accuracy, each as the mean over
seeds with its 95% t interval, the seeds that reached the target, and paired
differences against a baseline method (per seed, with the interval and the paired
t-test's p). :func:`curves` averages a method's curves over seeds with interval bands
on a steps, seconds or MB axis (``scripts/plot.py``).

The statistics here are the one implementation of the project (the reproduction
protocol reads the same): :func:`t_interval` (mean, sd and two-sided t interval),
:func:`paired` (the same for per-seed differences, with the paired t-test's p),
:func:`one_sided_p`, :func:`seeds_needed` and :func:`to_target` (a curve read at the
first evaluation reaching a target; a seed that never reaches it counts with its
value at the last evaluation, a lower bound, and ``reached`` False).

Labels never merge runs that were given: methods are labelled by the fields in which
their configs differ; runs whose config cannot be told apart (the same method and seed
given twice, e.g. two copies of a sweep) stay separate methods labelled by the shortest
distinguishing end of their paths.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from afl_jax.errors import UserError
from afl_jax.pipeline import metrics_io
from afl_jax.pipeline.workdir import SWEEP_FILE, read_json

ALPHA = 0.05  # two-sided 95% intervals
POWER_Z = 0.8416  # z of 80% power, for the seeds an undecided difference would need
AXES = {'steps': ('step', 1.0), 'seconds': ('wall_clock', 1.0), 'mb': ('bytes_up', 1e-6)}
AXIS_NAMES = {'steps': 'server steps', 'seconds': 'simulated seconds', 'mb': 'MB uploaded'}
# Fields that never tell two methods apart (where files are read, how long a run was cut).
_NOT_METHOD = ('seed', 'data_dir', 'download', 'stop_after_steps', 'checkpoint_every')


class ResultsError(UserError):
  """A folder that holds no runs, or runs that cannot be compared (one line)."""


# ---- statistics ---------------------------------------------------------------------------
def t_interval(values: Sequence[float], alpha: float = ALPHA) -> dict[str, float]:
  """``n``, ``mean``, ``sd`` (ddof 1) and the two-sided ``1 - alpha`` t interval
  ``mean -+ t_{1 - alpha/2, n-1} sd / sqrt(n)`` (``lo``, ``hi``); infinite for n < 2,
  the mean itself when every value is equal."""
  x = np.asarray(values, np.float64)
  n = len(x)
  mean = float(np.mean(x)) if n else math.nan
  sd = float(np.std(x, ddof=1)) if n > 1 else math.nan
  if n < 2:
    return {'n': n, 'mean': mean, 'sd': sd, 'lo': -math.inf, 'hi': math.inf}
  if (x == x[0]).all():  # exactly: a mean of equal floats may round off them
    return {'n': n, 'mean': float(x[0]), 'sd': 0.0, 'lo': float(x[0]), 'hi': float(x[0])}
  half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * sd / math.sqrt(n)
  return {'n': n, 'mean': mean, 'sd': sd, 'lo': mean - half, 'hi': mean + half}


def paired(d: Sequence[float], alpha: float = ALPHA) -> dict[str, float]:
  """:func:`t_interval` of per-seed differences ``d`` with ``p``, the two-sided paired
  t-test's p-value (1 for n < 2; 0 or 1 when every difference is equal)."""
  out = t_interval(d, alpha)
  n, mean, sd = out['n'], out['mean'], out['sd']
  if n < 2:
    return out | {'p': 1.0}
  if sd == 0.0:
    return out | {'p': 0.0 if mean != 0 else 1.0}
  t = mean / (sd / math.sqrt(n))
  return out | {'p': float(2 * stats.t.sf(abs(t), n - 1))}


def one_sided_p(d: Sequence[float], bound: float, alternative: str) -> float:
  """p of H0 "mean >= bound" (alternative ``'less'``) or "mean <= bound" (``'greater'``)."""
  x = np.asarray(d, np.float64)
  if len(x) < 2:
    return 1.0
  mean = float(np.mean(x))
  if (x == x[0]).all():
    mean = float(x[0])
    return 0.0 if (mean < bound if alternative == 'less' else mean > bound) else 1.0
  t = (mean - bound) / (float(np.std(x, ddof=1)) / math.sqrt(len(x)))
  return float(stats.t.cdf(t, len(x) - 1) if alternative == 'less' else stats.t.sf(t, len(x) - 1))


def seeds_needed(mean: float, sd: float, over: float = 0.0, two_sided: bool = True) -> float:
  """Seeds for 80% power to decide an effect of ``|mean| - over`` at the observed std
  (normal approximation); inf when there is no effect."""
  effect = abs(mean) - over
  if not math.isfinite(sd) or effect <= 0:
    return math.inf
  z = stats.norm.ppf(1 - ALPHA / (2 if two_sided else 1)) + POWER_Z
  return float(max(3, math.ceil((z * sd / effect) ** 2) + 1))


def to_target(
  records: Sequence[Mapping[str, Any]], target: float, key: str = 'test_accuracy'
) -> tuple[dict[str, float], bool]:
  """``({'steps', 'seconds', 'mb'}, reached)`` at the first record whose ``key`` reaches
  ``target``; never reached: the last record's values (lower bounds) and False."""
  hit = metrics_io.first_reaching(records, target, key)
  row = hit if hit is not None else records[-1]
  return {a: float(row.get(col, math.nan)) * scale for a, (col, scale) in AXES.items()}, (
    hit is not None
  )


# ---- runs ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RunRecords:
  """One run: its folder, the argument it came from, its config (dotted fields; None
  when unknown), seed and evaluation records."""

  path: str
  source: str
  config: dict[str, Any] | None
  seed: int | None
  records: list[dict]


def flatten(d: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
  """``{'a': {'b': 1}}`` -> ``{'a.b': 1}`` (lists as tuples)."""
  out: dict[str, Any] = {}
  for k, v in d.items():
    if isinstance(v, Mapping):
      out.update(flatten(v, f'{prefix}{k}.'))
    else:
      out[f'{prefix}{k}'] = tuple(v) if isinstance(v, list) else v
  return out


def _sweep_config(run_dir: str) -> dict[str, Any] | None:
  """A sweep run's config: the sweep's config with the run's grid point applied."""
  parent, name = os.path.split(os.path.normpath(run_dir))
  saved = read_json(os.path.join(parent, SWEEP_FILE), strict=False)
  summary = read_json(os.path.join(parent, 'summary.json'), strict=False)
  if not isinstance(saved, dict) or not isinstance(summary, dict):
    return None
  point = next((r for r in summary.get('runs') or [] if r.get('name') == name), None)
  if point is None:
    return None
  config = {k: v for k, v in flatten(saved.get('config', {})).items() if not k.startswith('sweep.')}
  config.update(flatten(point.get('hparams', {})) | {'seed': point.get('seed')})
  return {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}


def read_run(path: str, source: str | None = None) -> RunRecords:
  """The run in folder ``path`` (a single run's workdir or a sweep's run folder)."""
  records = metrics_io.read_metrics(path)
  if not records:
    raise ResultsError(f'{path}/{metrics_io.METRICS_FILE} holds no evaluation')
  saved = read_json(os.path.join(path, 'config.json'), strict=False)
  config = flatten(saved) if isinstance(saved, dict) else _sweep_config(path)
  seed = config.get('seed') if config else None
  return RunRecords(path, source or path, config, seed, records)


def load(paths: Iterable[str]) -> list[RunRecords]:
  """Every run of the given run folders and sweep folders (a sweep: each run in it)."""
  out, seen = [], set()
  for p in paths:
    real = os.path.realpath(p)
    if real in seen:
      raise ResultsError(f'{p} is given twice')
    seen.add(real)
    if not os.path.isdir(p):
      raise ResultsError(f'{p} is not a directory (give run or sweep folders)')
    if os.path.isfile(os.path.join(p, metrics_io.METRICS_FILE)):
      out.append(read_run(p))
      continue
    subs = sorted(
      d for d in os.listdir(p) if os.path.isfile(os.path.join(p, d, metrics_io.METRICS_FILE))
    )
    if not subs:
      raise ResultsError(f'{p} holds no {metrics_io.METRICS_FILE} and no run folders with one')
    out.extend(read_run(os.path.join(p, d), source=p) for d in subs)
  return out


def short_paths(paths: Sequence[str]) -> list[str]:
  """The shortest end of each path (whole components) that no other path ends with."""
  parts = [os.path.normpath(os.path.abspath(p)).split(os.sep) for p in paths]
  out = []
  for i, mine in enumerate(parts):
    for k in range(1, len(mine) + 1):
      end = mine[-k:]
      if all(other[-k:] != end for j, other in enumerate(parts) if j != i):
        break
    out.append(os.path.join(*end) if end else os.sep)
  return out


def _method_key(run: RunRecords) -> str | None:
  if run.config is None:
    return None
  kept = {k: v for k, v in run.config.items() if k not in _NOT_METHOD}
  return json.dumps(kept, sort_keys=True, default=str)


def _value(v: Any) -> str:
  return f'{v:g}' if isinstance(v, float) else str(v)


def _labels(configs: Sequence[dict[str, Any]]) -> list[str]:
  """Each method's algorithm and the fields in which it differs from the methods of the
  same algorithm (an hparam another algorithm lacks does not count)."""
  out = []
  algs = {c.get('algorithm') for c in configs}
  for c in configs:
    same = [o for o in configs if o is not c and o.get('algorithm') == c.get('algorithm')]
    fields = sorted(
      k
      for k, v in c.items()
      if k not in _NOT_METHOD and k != 'algorithm' and any(o.get(k, v) != v for o in same)
    )
    shown = [f'{k.rsplit(".", 1)[-1]}={_value(c[k])}' for k in fields]
    head = [str(c.get('algorithm'))] if len(algs) > 1 or not shown else []
    out.append(' '.join(head + [','.join(shown)] if shown else head))
  return out


def methods(runs: Sequence[RunRecords]) -> dict[str, list[RunRecords]]:
  """Method label -> its runs (one per seed). Runs are one method when their configs
  match in everything but the seed; a method given the same seed twice is split by the
  argument each came from, and runs without a known config are a method each."""
  groups: dict[tuple, list[RunRecords]] = {}
  for r in runs:
    key = _method_key(r)
    groups.setdefault((key,) if key else ('path', r.path), []).append(r)
  split: dict[tuple, list[RunRecords]] = {}
  for key, members in groups.items():
    seeds = [m.seed for m in members]
    if len(set(seeds)) == len(seeds):
      split[key] = members
      continue
    for m in members:  # repeated seeds: one method per source (per run if still repeated)
      by_source = [o for o in members if o.source == m.source]
      repeated = len({o.seed for o in by_source}) < len(by_source)
      split.setdefault(key + ((m.path,) if repeated else (m.source,)), []).append(m)
  keys = list(split)
  configured = [k for k in keys if k[0] != 'path']
  names = dict(zip(configured, _labels([split[k][0].config for k in configured])))
  places = [k[-1] if len(k) > 1 else '' for k in keys]
  ends = dict(zip(places, short_paths(places))) if any(places) else {}
  out: dict[str, list[RunRecords]] = {}
  for k in keys:
    label = names.get(k, '')
    if len(k) > 1:
      label = f'{label} ({ends[k[-1]]})' if label else ends[k[-1]]
    while label in out:  # never merge: a label taken already gets the path too
      label = f'{label} ({split[k][0].path})'
    out[label] = split[k]
  return out


# ---- the table ----------------------------------------------------------------------------
def per_seed(
  runs: Sequence[RunRecords], metric: str = 'test_accuracy', target: float | None = None
) -> pd.DataFrame:
  """One row per seed: ``final``, ``best`` and, with a target, ``steps``, ``seconds``,
  ``mb`` to it and ``reached``. A non-finite final value (a diverged run) counts as 0."""
  rows = {}
  for i, r in enumerate(runs):
    values = [float(x[metric]) for x in r.records if x.get(metric) is not None]
    if not values:
      raise ResultsError(f'{r.path} has no {metric!r} in {metrics_io.METRICS_FILE}')
    final = values[-1] if math.isfinite(values[-1]) else 0.0
    finite = [v for v in values if math.isfinite(v)]
    row = {'final': final, 'best': max(finite) if finite else 0.0}
    if target:
      reached_at, reached = to_target(r.records, target, metric)
      row |= reached_at | {'reached': reached}
    rows[r.seed if r.seed is not None else i] = row
  return pd.DataFrame.from_dict(rows, orient='index').sort_index()


def _target_of(runs: Sequence[RunRecords]) -> float | None:
  targets = {(r.config or {}).get('target_accuracy') for r in runs}
  target = targets.pop() if len(targets) == 1 else None
  return float(target) if target else None


def table(
  groups: Mapping[str, Sequence[RunRecords]],
  *,
  metric: str = 'test_accuracy',
  target: float | None = None,
  baseline: str | None = None,
  alpha: float = ALPHA,
) -> pd.DataFrame:
  """One row per method: ``seeds`` and, for each quantity Q, ``Q``, ``Q_lo``, ``Q_hi``
  (mean and t interval over seeds). Quantities: ``final``, ``best`` (of ``metric``);
  with a target (default: the runs' ``target_accuracy`` where they share one),
  ``steps``, ``seconds``, ``mb`` to it and ``reached`` (seeds that did); with a
  ``baseline`` method, ``diff_Q`` (``_lo``, ``_hi``, ``_p``, ``_n``) for Q in final, best
  and the to-target ones: the method minus the baseline, paired by seed.
  """
  if baseline is not None and baseline not in groups:
    raise ResultsError(f'--baseline={baseline!r} is not a method; methods: {list(groups)}')
  if target is None:
    target = _target_of([r for rs in groups.values() for r in rs])
  seeds = {label: per_seed(rs, metric, target) for label, rs in groups.items()}
  quantities = ['final', 'best'] + (['steps', 'seconds', 'mb'] if target else [])
  out = []
  for label, frame in seeds.items():
    row: dict[str, Any] = {'method': label, 'seeds': len(frame)}
    for q in quantities:
      st = t_interval(frame[q].to_numpy(float), alpha)
      row |= {q: st['mean'], f'{q}_lo': st['lo'], f'{q}_hi': st['hi']}
    if target:
      row['reached'] = int(frame['reached'].sum())
    if baseline is not None and label != baseline:
      base = seeds[baseline]
      common = frame.index.intersection(base.index)
      for q in quantities:
        st = paired((frame.loc[common, q] - base.loc[common, q]).to_numpy(float), alpha)
        row |= {f'diff_{q}{s}': st[k] for s, k in (('', 'mean'), ('_lo', 'lo'), ('_hi', 'hi'))}
        row |= {f'diff_{q}_p': st['p'], f'diff_{q}_n': st['n']}
    out.append(row)
  frame = pd.DataFrame(out).set_index('method')
  frame.attrs.update(target=target, metric=metric, baseline=baseline)
  return frame


_UNITS = {
  'final': ('final {m}', '{:.3f}'),
  'best': ('best {m}', '{:.3f}'),
  'steps': ('steps to {t}', '{:.0f}'),
  'seconds': ('seconds to {t}', '{:.1f}'),
  'mb': ('MB to {t}', '{:.2f}'),
}


def _ci(mean: float, lo: float, hi: float, fmt: str) -> str:
  if not math.isfinite(mean):
    return '—'
  if not (math.isfinite(lo) and math.isfinite(hi)):
    return fmt.format(mean)
  return f'{fmt.format(mean)} [{fmt.format(lo)}, {fmt.format(hi)}]'


def markdown(frame: pd.DataFrame) -> str:
  """The table as a paper prints it: mean [95% interval] per method, one column per
  quantity; paired differences as ``+d [lo, hi]`` against the baseline."""
  metric, target = frame.attrs.get('metric', 'accuracy'), frame.attrs.get('target')
  m = metric.replace('_', ' ')
  rows = []
  for label, r in frame.iterrows():
    row = {'method': label, 'seeds': int(r['seeds'])}
    for q, (head, fmt) in _UNITS.items():
      if q not in frame:
        continue
      name = head.format(m=m, t=f'{target:g}' if target else '')
      cell = _ci(r[q], r[f'{q}_lo'], r[f'{q}_hi'], fmt)
      if q in ('steps', 'seconds', 'mb') and r['reached'] < r['seeds']:
        cell = f'>= {cell}'  # a lower bound: not every seed reached the target
      row[name] = cell
      if f'diff_{q}' in frame:
        sign = '{:+' + fmt[2:]
        diff = _ci(r[f'diff_{q}'], r[f'diff_{q}_lo'], r[f'diff_{q}_hi'], sign)
        row[f'Δ {head.split(" ")[0]} vs {frame.attrs["baseline"]}'] = diff
    if target:
      row['reached'] = f'{int(r["reached"])}/{int(r["seeds"])}'
    rows.append(row)
  text = pd.DataFrame(rows).to_markdown(index=False)
  note = '\n\nmean [95% t interval] over seeds; Δ: paired by seed against the baseline' + (
    '; ">=": some seeds never reached the target (their last value counts)' if target else ''
  )
  return text + note + '\n'


# ---- curves -------------------------------------------------------------------------------
def curves(
  runs: Sequence[RunRecords], x: str = 'steps', metric: str = 'test_accuracy', alpha=ALPHA
) -> dict[str, np.ndarray]:
  """A method's curve over seeds on axis ``x`` (steps, seconds or mb): ``x``, ``mean``,
  ``lo``, ``hi`` (pointwise t interval) and ``n``. Each seed's curve is read on the
  union of the seeds' x values (linear interpolation), up to the end of the shortest."""
  if x not in AXES:
    raise ResultsError(f'--x={x!r} is invalid: one of {", ".join(AXES)}')
  column, scale = AXES[x]
  pairs = []
  for r in runs:
    recs = [q for q in r.records if q.get(metric) is not None and q.get(column) is not None]
    if not recs:
      raise ResultsError(f'{r.path} has no {metric!r} with {column!r}')
    pairs.append(
      (np.asarray([q[column] for q in recs], float) * scale, np.asarray([q[metric] for q in recs]))
    )
  end = min(p[0][-1] for p in pairs)
  grid = np.unique(np.concatenate([p[0] for p in pairs]))
  grid = grid[grid <= end]
  ys = np.stack([np.interp(grid, px, py) for px, py in pairs])
  n = len(ys)
  mean = ys.mean(axis=0)
  if n < 2:
    return {'x': grid, 'mean': mean, 'lo': mean, 'hi': mean, 'n': n}
  half = stats.t.ppf(1 - alpha / 2, n - 1) * ys.std(axis=0, ddof=1) / math.sqrt(n)
  return {'x': grid, 'mean': mean, 'lo': mean - half, 'hi': mean + half, 'n': n}


__all__ = [
  'ALPHA',
  'AXES',
  'ResultsError',
  'RunRecords',
  'curves',
  'load',
  'markdown',
  'methods',
  'one_sided_p',
  'paired',
  'per_seed',
  'seeds_needed',
  't_interval',
  'table',
  'to_target',
]
