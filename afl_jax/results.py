"""Results as a paper prints them: methods over seeds, with 95% t intervals.

:func:`load` reads the runs, :func:`methods` groups those that differ only in the seed
(never merged silently), :func:`table` and :func:`curves` summarize the completed runs.
The columns: docs/extending.md."""

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
from afl_jax.pipeline import record as record_lib
from afl_jax.pipeline.record import RunRecord
from afl_jax.pipeline.workdir import read_json

ALPHA = 0.05  # two-sided 95% intervals
POWER_Z = 0.8416  # z of 80% power, for the seeds an undecided difference would need
AXES = {'steps': ('step', 1.0), 'seconds': ('wall_clock', 1.0), 'mb': ('bytes_up', 1e-6)}
AXIS_NAMES = {'steps': 'server steps', 'seconds': 'simulated seconds', 'mb': 'MB uploaded'}
# Fields that never tell two methods apart: the pairing axis, and those no number depends on.
_NOT_METHOD = ('seed', *record_lib.FREE_FIELDS)


class ResultsError(UserError):
  """A folder that holds no runs, or runs that cannot be compared (one line)."""


def _half(sd, n: int):
  """Half the width of the two-sided 95% t interval of a mean of ``n``."""
  return float(stats.t.ppf(1 - ALPHA / 2, n - 1)) * sd / math.sqrt(n)


def t_interval(values: Sequence[float]) -> dict[str, float]:
  """``n``, ``mean``, ``sd`` (ddof 1) and the two-sided 95% t interval ``lo``, ``hi``
  (infinite for n < 2; the mean itself when every value is equal)."""
  x = np.asarray(values, np.float64)
  n = len(x)
  mean = float(np.mean(x)) if n else math.nan
  sd = float(np.std(x, ddof=1)) if n > 1 else math.nan
  if n < 2:
    return {'n': n, 'mean': mean, 'sd': sd, 'lo': -math.inf, 'hi': math.inf}
  if (x == x[0]).all():  # exactly: a mean of equal floats may round off them
    mean, sd = float(x[0]), 0.0
  half = _half(sd, n)
  return {'n': n, 'mean': mean, 'sd': sd, 'lo': mean - half, 'hi': mean + half}


def paired(d: Sequence[float]) -> dict[str, float]:
  """:func:`t_interval` of per-seed differences with ``p``, the two-sided paired t-test's."""
  out = t_interval(d)
  n, mean, sd = out['n'], out['mean'], out['sd']
  if n < 2:
    return out | {'p': 1.0}
  if sd == 0.0:
    return out | {'p': 0.0 if mean != 0 else 1.0}
  return out | {'p': float(2 * stats.t.sf(abs(mean / (sd / math.sqrt(n))), n - 1))}


def one_sided_p(d: Sequence[float], bound: float, alternative: str) -> float:
  """p of H0 "mean >= bound" (alternative ``'less'``) or "mean <= bound" (``'greater'``)."""
  x = np.asarray(d, np.float64)
  if len(x) < 2:
    return 1.0
  if (x == x[0]).all():
    return 0.0 if (x[0] < bound if alternative == 'less' else x[0] > bound) else 1.0
  t = (float(np.mean(x)) - bound) / (float(np.std(x, ddof=1)) / math.sqrt(len(x)))
  return float(stats.t.cdf(t, len(x) - 1) if alternative == 'less' else stats.t.sf(t, len(x) - 1))


def seeds_needed(mean: float, sd: float, over: float = 0.0) -> float:
  """Seeds for 80% power to decide an effect of ``|mean| - over`` at the observed std."""
  effect = abs(mean) - over
  if not math.isfinite(sd) or effect <= 0:
    return math.inf
  z = stats.norm.ppf(1 - ALPHA / 2) + POWER_Z
  return float(max(3, math.ceil((z * sd / effect) ** 2) + 1))


def load(paths: Iterable[str]) -> list[RunRecord]:
  """Every run of the given run and sweep folders (a sweep: the runs its ``summary.json``
  lists, else every folder in it holding a ``metrics.jsonl``)."""
  out, seen, metrics = [], set(), metrics_io.METRICS_FILE
  for p in paths:
    real = os.path.realpath(p)
    if real in seen:
      raise ResultsError(f'{p} is given twice')
    seen.add(real)
    if not os.path.isdir(p):
      raise ResultsError(f'{p} is not a directory (give run or sweep folders)')
    if os.path.isfile(os.path.join(p, metrics)):
      out.append(record_lib.read(p))
      continue
    summary = read_json(os.path.join(p, record_lib.SUMMARY_FILE), strict=False)
    listed = [r.get('name') for r in summary.get('runs', [])] if isinstance(summary, dict) else []
    subs = [n for n in listed if isinstance(n, str)] or sorted(os.listdir(p))
    subs = [d for d in subs if os.path.isfile(os.path.join(p, d, metrics))]
    if not subs:
      raise ResultsError(f'{p} holds no {metrics} and no run folders with one')
    out += [dataclasses.replace(record_lib.read(os.path.join(p, d)), source=str(p)) for d in subs]
  return out


def _short_paths(paths: Sequence[str]) -> list[str]:
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


def _fields(run: RunRecord) -> dict[str, Any]:
  """What a method is: the config but the seed, and the seed-independent inputs (code,
  devices, JAX's settings, files read)."""
  flat = record_lib.flatten(run.config).items()
  out = {k: v for k, v in flat if k.split('.')[0] not in _NOT_METHOD}
  ident = run.identity
  out |= {f'code:{m}': d[:8] for m, d in (ident.get('code') or {}).items()}
  out |= (ident.get('engine') or {}) | (ident.get('jax') or {})  # JAX's settings, versions
  out |= {f'{k} file': v[:8] for k, v in (ident.get('sources') or {}).items() if v}
  return out


def methods(runs: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
  """Method label (the fields in which it differs) -> its runs (module docstring)."""
  groups: dict[str, list[RunRecord]] = {}
  for r in runs:
    key = json.dumps(_fields(r), sort_keys=True, default=str) if r.config else r.path
    groups.setdefault(key, []).append(r)
  split: dict[tuple, list[RunRecord]] = {}
  for key, members in groups.items():
    seeds = [m.seed for m in members]
    for m in members:  # the same seed twice: one method per sweep (or run) it came from
      split.setdefault((key, m.source) if len(set(seeds)) < len(seeds) else (key,), []).append(m)
  keys = list(split)
  fields = [_fields(split[k][0]) if split[k][0].config else {} for k in keys]
  places = [k[1] if len(k) > 1 else ('' if f else k[0]) for k, f in zip(keys, fields)]
  ends = dict(zip(places, _short_paths(places))) if any(places) else {}
  algs = {f.get('algorithm') for f in fields}
  value = lambda v: f'{v:g}' if isinstance(v, float) else str(v)  # noqa: E731
  out: dict[str, list[RunRecord]] = {}
  for k, f, place in zip(keys, fields, places):
    same = [o for o in fields if o is not f and o.get('algorithm') == f.get('algorithm')]
    differ = sorted(
      x for x, v in f.items() if x != 'algorithm' and any(o.get(x, v) != v for o in same)
    )
    shown = ','.join(f'{x.rsplit(".", 1)[-1]}={value(f[x])}' for x in differ)
    head = str(f.get('algorithm')) if f and (len(algs) > 1 or not shown) else ''
    label = ' '.join(p for p in (head, shown) if p)
    if place:  # never merged: where they came from tells them apart
      label = f'{label} ({ends[place]})' if label else ends[place]
    while label in out:
      label = f'{label} ({split[k][0].path})'
    out[label] = split[k]
  return out


def parse_at(text: str | None) -> tuple[str, float] | None:
  """``'seconds:200'`` -> ``('seconds', 200.0)`` (None: no budget); ResultsError if malformed."""
  if not text:
    return None
  axis, _, value = text.partition(':')
  try:
    budget = float(value)
  except ValueError:
    budget = math.nan
  if axis not in AXES or not budget > 0:
    raise ResultsError(f'--at={text!r} is invalid: give AXIS:BUDGET, AXIS one of {", ".join(AXES)}')
  return axis, budget


def at_budget(run: RunRecord, at: tuple[str, float] | None) -> tuple[list[dict], str]:
  """(the run's records up to the budget ``at``, its status there): ``completed`` where it
  reached the budget (or finished before it), else its own status."""
  if at is None:
    return run.records, run.status
  column, scale = AXES[at[0]]
  within = [r for r in run.records if r[column] * scale <= at[1] + 1e-9]
  reached = run.records and run.records[-1][column] * scale >= at[1] - 1e-9
  diverged = (
    run.status.startswith('diverged') and int(run.status.rsplit(' ', 1)[1]) <= within[-1]['step']
  )
  if diverged or not (reached or run.completed):
    return within, run.status
  return within, 'completed'


def per_seed(runs, metric='test_accuracy', target=None, at=None) -> pd.DataFrame:
  """One row per run: ``seed``, ``status``, for a completed one ``final`` and ``best`` (in the
  metric's direction) and, with a target, for any run with records ``steps``, ``seconds``,
  ``mb`` to it and ``reached`` (False: the last values, lower bounds)."""
  best = min if metrics_io.lower_is_better(metric) else max
  rows = []
  for i, r in enumerate(runs):
    records, status = at_budget(r, at)
    row: dict[str, Any] = {'seed': r.seed if r.seed is not None else i, 'status': status}
    values = [float(x[metric]) for x in records if x.get(metric) is not None]
    if status == 'completed':
      if not values:
        raise ResultsError(f'{r.path} has no {metric!r} in {metrics_io.METRICS_FILE}')
      row |= {'final': values[-1], 'best': best(values)}
    if target and records:
      hit = metrics_io.first_reaching(records, target, metric)
      end = hit if hit is not None else records[-1]
      row |= {a: float(end[col]) * s for a, (col, s) in AXES.items()} | {'reached': hit is not None}
    rows.append(row)
  return pd.DataFrame(rows).set_index('seed')


def table(
  groups: Mapping[str, Sequence[RunRecord]],
  *,
  metric: str = 'test_accuracy',
  target: float | None = None,
  baseline: str | None = None,
  at: tuple[str, float] | None = None,
) -> pd.DataFrame:
  """One row per method: ``seeds`` (completed runs), ``stopped``, ``diverged`` and, for each
  quantity Q (final, best; with a target steps, seconds, mb and ``reached``), ``Q``,
  ``Q_lo``, ``Q_hi`` over the completed runs; with a ``baseline``, ``diff_Q`` (``_lo``,
  ``_hi``, ``_p``, ``_n``, ``_bound``) paired on the seeds both completed."""
  if baseline is not None and baseline not in groups:
    raise ResultsError(f'--baseline={baseline!r} is not a method; methods: {list(groups)}')
  if target is None and metric.endswith('accuracy'):  # the runs' common target_accuracy
    targets = {r.config.get('target_accuracy') for rs in groups.values() for r in rs}
    target = float(targets.pop() or 0) or None if len(targets) == 1 else None
  seeds = {label: per_seed(rs, metric, target, at) for label, rs in groups.items()}
  done = {k: f[f.status == 'completed'] for k, f in seeds.items()}
  quantities = ['final', 'best'] + (list(AXES) if target else [])
  out = []
  for label, frame in done.items():
    status = seeds[label].status
    row: dict[str, Any] = {'method': label, 'seeds': len(frame)}
    row |= {k: int(status.str.startswith(k).sum()) for k in ('stopped', 'diverged')}
    for q in quantities:
      st = t_interval(frame[q].to_numpy(float) if q in frame else [])
      row |= {q: st['mean'], f'{q}_lo': st['lo'], f'{q}_hi': st['hi']}
    if target:
      row['reached'] = int(frame['reached'].sum()) if 'reached' in frame else 0
    base = done[baseline] if baseline is not None and label != baseline else None
    common = frame.index.intersection(base.index) if base is not None else []
    for q in quantities if base is not None else ():
      d = (frame.loc[common, q] - base.loc[common, q]).to_numpy(float) if len(common) else []
      st = paired(d)
      row |= {f'diff_{q}{s}': st[k] for s, k in (('', 'mean'), ('_lo', 'lo'), ('_hi', 'hi'))}
      row |= {f'diff_{q}_p': st['p'], f'diff_{q}_n': st['n']}
      if q in AXES and len(common):  # a bound where a side never reached the target
        mine, theirs = (~f.loc[common, 'reached'] for f in (frame, base))
        either = '>=' if mine.any() else '<=' if theirs.any() else ''
        row[f'diff_{q}_bound'] = '?' if mine.any() and theirs.any() else either
    out.append(row)
  frame = pd.DataFrame(out).set_index('method')
  frame.attrs.update(target=target, metric=metric, baseline=baseline, at=at)
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
  """The table as a paper prints it: mean [95% interval] over the completed runs per method;
  paired differences ``+d [lo, hi] (n)`` against the baseline; bounds marked."""
  metric, target, at, baseline = (
    frame.attrs.get(k) for k in ('metric', 'target', 'at', 'baseline')
  )
  metric = metric or 'accuracy'
  m = metric.replace('_', ' ') + (f' at {at[1]:g} {AXIS_NAMES[at[0]]}' if at is not None else '')
  to = f'{"<=" if metrics_io.lower_is_better(metric) else ">="} {target:g}' if target else ''
  rows = []
  for label, r in frame.iterrows():
    runs = f'{int(r["seeds"])}' + ''.join(
      f', {int(r[k])} {k}' for k in ('stopped', 'diverged') if r[k]
    )
    row = {'method': label, 'completed runs': runs}
    for q, (head, fmt) in _UNITS.items():
      if q not in frame:
        continue
      cell = _ci(r[q], r[f'{q}_lo'], r[f'{q}_hi'], fmt)
      if q in AXES and r['reached'] < r['seeds']:
        cell = f'>= {cell}'  # a lower bound: not every seed reached the target
      row[head.format(m=m, t=to)] = cell
      if f'diff_{q}' in frame and label != baseline:
        diff = _ci(r[f'diff_{q}'], r[f'diff_{q}_lo'], r[f'diff_{q}_hi'], '{:+' + fmt[2:])
        bound = r.get(f'diff_{q}_bound') if f'diff_{q}_bound' in frame else ''
        bound = bound if isinstance(bound, str) else ''
        name = f'Δ {head.split(" ")[0]} vs {baseline}'
        row[name] = f'{bound} {diff} (n={int(r[f"diff_{q}_n"])})'.strip()
    if target:
      row['reached'] = f'{int(r["reached"])}/{int(r["seeds"])}'
    rows.append(row)
  note = (
    '\n\nmean [95% t interval] over the completed runs (stopped and diverged runs are counted, '
    'never averaged); Δ: paired by the seeds both methods completed (n)'
  )
  if target:
    note += '; ">=": some seeds never reached the target (their last value counts)'
  return pd.DataFrame(rows).fillna('').to_markdown(index=False) + note + '\n'


def curves(runs, x='steps', metric='test_accuracy', at=None) -> dict[str, Any]:
  """A method's curve over its completed runs on axis ``x``: ``x``, ``mean``, ``lo``,
  ``hi`` (pointwise t interval), ``n``; runs interpolated up to the shortest one's end."""
  if x not in AXES:
    raise ResultsError(f'--x={x!r} is invalid: one of {", ".join(AXES)}')
  column, scale = AXES[x]
  pairs = []
  for r in runs:
    records, status = at_budget(r, at)
    recs = [q for q in records if q.get(metric) is not None]
    if status == 'completed' and recs:
      xs = np.asarray([q[column] for q in recs], float) * scale
      pairs.append((xs, np.asarray([q[metric] for q in recs])))
  if not pairs:
    return {k: np.zeros(0) for k in ('x', 'mean', 'lo', 'hi')} | {'n': 0}
  end = min(p[0][-1] for p in pairs)
  grid = np.unique(np.concatenate([p[0] for p in pairs]))
  grid = grid[grid <= end]
  ys = np.stack([np.interp(grid, px, py) for px, py in pairs])
  n, mean = len(ys), ys.mean(axis=0)
  half = _half(ys.std(axis=0, ddof=1), n) if n > 1 else 0.0
  return {'x': grid, 'mean': mean, 'lo': mean - half, 'hi': mean + half, 'n': n}


__all__ = 'ALPHA AXES ResultsError RunRecord at_budget curves load markdown methods'.split()
__all__ += 'one_sided_p paired parse_at per_seed seeds_needed t_interval table'.split()
