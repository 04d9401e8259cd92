"""Select on validation over the selection seeds; score each claim on the test seeds as the
tests its declaration fixes, its verdict composed from those decided after the
Benjamini-Hochberg and Holm adjustments (docs/results/protocol.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from afl_jax import results
from afl_jax.errors import UserError
from afl_jax.pipeline import record
from afl_jax.reproduction import records, runs, spec
from afl_jax.results import ALPHA, one_sided_p, paired, seeds_needed  # the one implementation

# A paper's accuracy effect is comparable only if B's validation accuracy (selection seeds)
# plus the effect stays below this (20 CIFAR-10 points over an 80% baseline cannot show).
ACCURACY_CEILING = 0.99
DEFAULT_TARGET_FRACTION = 0.9
# "More consistent": a paired bootstrap over the test seeds, this many resamples, this seed.
BOOTSTRAP = 10_000
BOOTSTRAP_SEED = 0
RUN_KEYS = records.KEYS[:-1]  # experiment, method, phase, setting, seed
# metric -> the per-seed table's column
TO_TARGET = {'steps_to_target': 'steps', 'clock_to_target': 'seconds', 'mb_to_target': 'mb'}
ACCURACIES = ['val_accuracy', 'test_accuracy', 'best_test_accuracy']


def _runs(frame: pd.DataFrame) -> dict[tuple, list[record.RunRecord]]:
  """``frame``'s runs per (experiment, method, phase, setting) as run records, by seed; one
  whose last evaluation is not finite diverged there."""
  f = frame.sort_values([*RUN_KEYS, 'step'], kind='stable')
  evaluations = f[['step', *records.METRIC_COLUMNS]].to_dict('records')
  keys = list(zip(*(f[k].to_numpy(object).tolist() for k in RUN_KEYS)))
  last = records.last_rows(f).set_index(RUN_KEYS)
  bad = records.diverged(last)
  ends = np.flatnonzero([a != b for a, b in zip(keys, keys[1:])] + [True]) + 1
  out: dict[tuple, list[record.RunRecord]] = {}
  for start, end in zip([0, *ends[:-1]], ends):
    key = keys[start]
    status = f'diverged at step {last.step[key]}' if bad[key] else 'completed'
    name = '/'.join(map(str, key[:-1])) + f'/seed={key[-1]}'
    ident = {'digest': f[records.RUN].iloc[start]}
    run = record.RunRecord(name, {'seed': int(key[-1])}, ident, evaluations[start:end], status)
    out.setdefault(key[:-1], []).append(run)
  return out


def per_run(frame: pd.DataFrame, target: float | None = None, at=None) -> pd.DataFrame:
  """One row per run (``results.per_seed`` of both splits): its keys, ``run``, ``diverged``,
  ``ACCURACIES`` (0 once diverged) and with a ``target`` the to-target columns."""
  out = []
  for key, group in _runs(frame).items() if len(frame) else ():
    test = results.per_seed(group, 'test_accuracy', target, at)
    val = results.per_seed(group, 'val_accuracy', None, at)
    table = pd.DataFrame(index=test.index)
    table[RUN_KEYS[:-1]] = list(key)
    table['run'] = [r.identity['digest'] for r in group]
    table['diverged'] = test.status.str.startswith('diverged').to_numpy()
    for column, (of, q) in zip(ACCURACIES, ((val, 'final'), (test, 'final'), (test, 'best'))):
      table[column] = of.get(q, math.nan)
    table.loc[table.diverged, ACCURACIES] = 0.0
    for column in (*TO_TARGET.values(), 'reached') if target else ():
      table[column] = test[column]
    out.append(table.reset_index())
  columns = [*RUN_KEYS, 'run', 'diverged', *ACCURACIES]
  if not out:
    return pd.DataFrame(columns=columns)
  return pd.concat(out, ignore_index=True)[columns + list(out[0].columns.difference(columns))]


def rows(frame: pd.DataFrame, exp_key: str, label: str, phase: str, setting: str | None = None):
  """The rows of ``label`` in one phase of ``exp_key`` (at one ``setting``, if given)."""
  mine = (frame.experiment == exp_key) & (frame.method == label) & (frame.phase == phase)
  return frame[mine & (frame.setting == setting) if setting is not None else mine]


def select(table: pd.DataFrame, exp_key: str, label: str, at: Mapping[str, Any] = ()) -> dict:
  """``label``'s setting selected on validation (within ``at`` on the fields it sweeps; ties
  to the first in sorted order): ``setting``, ``val``, ``scores``, ``edges``; else ValueError."""
  mine = rows(table, exp_key, label, 'select')
  swept = {field for k in mine.setting.unique() for field in runs.setting_of(k)}
  at = {f: v for f, v in dict(at).items() if f in swept}
  want = {f: list(v) if isinstance(v, tuple) else v for f, v in at.items()}
  mine = mine[[all(runs.setting_of(k).get(f) == v for f, v in want.items()) for k in mine.setting]]
  if mine.empty:
    raise ValueError(f'{exp_key}/{label}: no selection records{f" at {dict(at)}" if at else ""}.')
  scores = mine.groupby('setting', sort=True)['val_accuracy'].mean()
  best = scores.idxmax()
  return {
    'setting': best,
    'val': float(scores[best]),
    'scores': scores,
    'edges': _edges(best, mine),
  }


def _edges(best: str, mine: pd.DataFrame) -> list[str]:
  """Swept numeric fields selected at their smallest or largest value (lists as tuples)."""
  tuples = lambda v: tuple(v) if isinstance(v, list) else v
  tried = [runs.setting_of(k) for k in mine.setting.unique()]
  out = []
  for field, value in runs.setting_of(best).items():
    values = sorted({tuples(t[field]) for t in tried})
    if len(values) > 1 and all(isinstance(v, int | float | tuple) for v in values):
      if tuples(value) in (values[0], values[-1]):
        side = 'low' if tuples(value) == values[0] else 'high'
        out.append(f'{field.rsplit(".", 1)[-1]} on {side} edge')
  return out


def selected_test(exp: spec.Experiment, frame: pd.DataFrame, table: pd.DataFrame, label: str):
  key = select(table, exp.key, label)['setting']
  return key, rows(frame, exp.key, label, 'test', key)


def selections(exp: spec.Experiment, table: pd.DataFrame) -> list[tuple[str, dict]]:
  out = [(m.label, select(table, exp.key, m.label)) for m in exp.methods]
  for claim in exp.claims:
    for label in (claim.better, claim.worse, *claim.baseline, *claim.condition) if claim.at else ():
      chosen = select(table, exp.key, label, claim.at)
      if (label, chosen['setting']) not in {(k, s['setting']) for k, s in out}:
        out.append((label, chosen))
  return out


def test_settings(exp: spec.Experiment, table: pd.DataFrame) -> dict[str, list[str]]:
  out: dict[str, list[str]] = {m.label: [] for m in exp.methods}
  for label, chosen in selections(exp, table):
    out[label].append(chosen['setting'])
  return out


def open_edges(exp: spec.Experiment, table: pd.DataFrame) -> list[str]:
  return [
    f'{label} ({_short(chosen["setting"])}): {", ".join(chosen["edges"])}'
    for label, chosen in selections(exp, table)
    if chosen['edges'] and label not in exp.edges_kept
  ]


def settings_to_test(
  paper_key: str, exp: spec.Experiment, records_dir: str = runs.RECORDS
) -> dict[str, list[str]]:
  """:func:`test_settings` on the declared selection sweeps; UserError on an open edge."""
  table = per_run(runs.selection_rows(paper_key, exp, records_dir))
  edges = open_edges(exp, table)
  if edges:
    raise UserError(
      f'{paper_key}/{exp.key}: selected on an edge of its grid: {"; ".join(edges)}; extend '
      'the grid past it (the selection runs again) before the test runs, or say why not '
      "in the experiment's edges_kept"
    )
  return test_settings(exp, table)


def target_of(exp: spec.Experiment, table: pd.DataFrame) -> float:
  """``exp.target``, else 90% of the median over methods of the selected mean validation
  accuracy, rounded down to a whole percent (diverged methods left out)."""
  if exp.target is not None:
    return exp.target
  means = [select(table, exp.key, m.label)['val'] for m in exp.methods]
  means = [m for m in means if math.isfinite(m) and m > 0]
  if not means:
    return 1.0
  return math.floor(100 * DEFAULT_TARGET_FRACTION * float(np.median(means))) / 100


AGREES, DISAGREES, INCONCLUSIVE = 'agrees', 'disagrees', 'inconclusive'
SMALLER = "smaller than the paper's effect"
AGREES_SMALLER = f'agrees, {SMALLER}'
EQUIVALENT = 'equivalent within the margin'
NOT_EQUIVALENT = 'disagrees (differ by more than the margin)'
NO_CONDITION = 'condition not reproduced'
NOT_COMPARABLE = "not comparable (the paper's effect is out of reach here)"
MISSED = 'inconclusive: target not reached'
DECIDED = (AGREES, AGREES_SMALLER, EQUIVALENT, SMALLER, DISAGREES, NOT_EQUIVALENT)
VERDICTS = (*DECIDED, NO_CONDITION, NOT_COMPARABLE, MISSED, INCONCLUSIVE)
# The tests a verdict rests on, fixed by the declaration (each adjusted on its own).
STATEMENT, BEYOND, BOUND = 'statement', 'beyond the margin', 'bound'
SIZE, CONDITION = "paper's size", 'condition'
REPRODUCED = 'reproduced'  # what a decided condition test says


def _part(name: str, verdict: str, p: float) -> dict:
  return {'name': name, 'verdict': verdict, 'p': min(1.0, p)}


def _two_sided(d: np.ndarray, at: float) -> tuple[float, bool]:
  """(p, mean above ``at``) of mean d = ``at``, two sides of 2.5%: twice the smaller p."""
  above, below = one_sided_p(d, at, 'greater'), one_sided_p(d, at, 'less')
  return 2 * min(above, below), above <= below


def bootstrap(da: np.ndarray, db: np.ndarray) -> dict[str, float]:
  """ "More consistent": T = |mean change of B| - |mean change of A| by a paired bootstrap:
  ``mean``, percentile interval, ``p`` (twice the smaller (k + 1) / (B + 1) side of 0), ``t``."""
  da, db = np.asarray(da, float), np.asarray(db, float)
  idx = np.random.default_rng(BOOTSTRAP_SEED).integers(0, len(da), size=(BOOTSTRAP, len(da)))
  t = np.abs(db[idx].mean(axis=1)) - np.abs(da[idx].mean(axis=1))
  lo, hi = np.quantile(t, [ALPHA / 2, 1 - ALPHA / 2])
  p = 2 * min(_share(t <= 0), _share(t >= 0))
  mean = float(abs(db.mean()) - abs(da.mean()))
  return {'mean': mean, 'sd': math.nan, 'lo': float(lo), 'hi': float(hi), 'p': p, 't': t}


def _share(hits: np.ndarray) -> float:
  return (int(np.sum(hits)) + 1) / (len(hits) + 1)


def _equal_time(frame: pd.DataFrame, exp: spec.Experiment, settings: Mapping[str, str], claim):
  """Per method of the claim's pairs (A-B, or each with its baseline; the condition's): its
  best test accuracy per seed within the simulated time both runs of the pair cover."""
  pairs = [(claim.better, claim.worse)]
  if claim.baseline:
    pairs = [(claim.baseline[0], claim.better), (claim.baseline[1], claim.worse)]
  pairs += [tuple(claim.condition)] if claim.condition else []
  curves = {m: rows(frame, exp.key, m, 'test', settings[m]) for p in pairs for m in p}
  out: dict[str, pd.Series] = {}
  for pair in pairs:
    ends = [curves[m].groupby('seed').wall_clock.max() for m in pair]
    budget = pd.concat(ends, axis=1).min(axis=1)
    for m in pair:
      best = {
        seed: per_run(
          curves[m][curves[m].seed == seed], at=('seconds', float(b))
        ).best_test_accuracy.iloc[0]
        for seed, b in budget.items()
      }
      out[m] = pd.Series(best).sort_index()
  return out


# The claim's fields a page shows.
SHOWN = ('ref', 'text', 'quote', 'kind', 'metric', 'margin', 'upper', 'factor', 'relative')
SHOWN += ('paper_effect', 'source', 'outside', 'restated', 'consistency', 'baseline')
SHOWN += ('incomparable', 'equal_time')


def score_claim(
  exp: spec.Experiment, claim: spec.Claim, frame: pd.DataFrame, table: pd.DataFrame, target: float
) -> dict:
  """One claim on the test seeds (``table``: :func:`per_run` at ``target``): the paired
  difference (positive favours the claim: A - B, log(B / A) - log(factor), or the drops),
  its interval, and every test its verdict can rest on (``parts``), each with its p."""
  names = (claim.better, claim.worse, *claim.baseline, *claim.condition)
  chosen = {label: select(table, exp.key, label, claim.at) for label in names}
  settings = {label: c['setting'] for label, c in chosen.items()}
  timed = _equal_time(frame, exp, settings, claim) if claim.equal_time else {}

  def values(label: str, metric: str = claim.metric) -> pd.DataFrame:
    mine = rows(table, exp.key, label, 'test', settings[label]).set_index('seed').sort_index()
    if metric in TO_TARGET:
      return pd.DataFrame({'value': mine[TO_TARGET[metric]], 'reached': mine.reached})
    if metric == 'not_reached':
      value = (~mine.reached.astype(bool)).astype(float)
    elif metric == 'diverged':
      value = mine.diverged.astype(float)
    else:
      value = timed[label] if label in timed and metric.endswith('test_accuracy') else mine[metric]
    return pd.DataFrame({'value': value, 'reached': True})

  a, b = values(claim.better), values(claim.worse)
  out = {'experiment': exp.key, **{field: getattr(claim, field) for field in SHOWN}}
  out |= {'A': claim.better, 'B': claim.worse}
  out |= {'A_setting': _short(settings[claim.better]), 'B_setting': _short(settings[claim.worse])}
  out['target'] = target if claim.metric in (*TO_TARGET, 'not_reached') else None
  out['exploratory'] = exp.exploratory
  seeds = a.index.intersection(b.index)
  a, b = a.loc[seeds], b.loc[seeds]
  for side, v in (('A', a), ('B', b)):
    hit = v.value[v.reached.astype(bool)]  # a to-target value over the seeds that reached it
    out[f'{side}_mean'], out[f'{side}_sd'] = float(v.value.mean()), float(v.value.std(ddof=1))
    out[f'{side}_reached'] = int(v.reached.sum())
    out[f'{side}_reached_mean'] = float(hit.mean()) if len(hit) else math.nan
  out |= {'n': len(seeds), 'ratio': False, 'blocked': []}
  if claim.kind == 'on_seeds':  # H0: the event happens on each seed with probability 1/2
    k, n = int(a.value.sum()), len(a)
    verdict = AGREES if k == n else DISAGREES if k == 0 else INCONCLUSIVE
    p = float(stats.binomtest(k, n, 0.5, alternative='two-sided').pvalue)
    ci = stats.binomtest(k, n).proportion_ci()  # Clopper-Pearson, for the plot
    out |= {'mean': k / n, 'sd': math.nan, 'lo': float(ci.low), 'hi': float(ci.high)}
    out |= {'parts': [_part(STATEMENT, verdict, p)], 'needed': math.inf, 'edges_against': []}
    return out | {'p': p, 'verdict_raw': compose(out)}
  if claim.baseline:  # the change from the other condition (A0, B0) to this one (A, B)
    a0, b0 = (values(label).value.loc[seeds] for label in claim.baseline)
    out['conditions'] = {claim.baseline[0]: a0.mean(), claim.better: a.value.mean()}
    out['conditions'] |= {claim.baseline[1]: b0.mean(), claim.worse: b.value.mean()}
    da, db = (a0 - a.value).to_numpy(float), (b0 - b.value).to_numpy(float)
    d = db - da
  elif claim.metric in TO_TARGET and (claim.kind == 'better' or claim.relative):
    d = speedup_log(a.value.to_numpy(float), b.value.to_numpy(float), claim.factor)
    out['ratio'] = True
  else:
    d = (a.value - b.value).to_numpy(float)
  st = bootstrap(da, db) if claim.consistency else paired(d)
  out |= {k: st[k] for k in ('mean', 'sd', 'lo', 'hi')}
  if out['ratio']:  # shown as the ratio B / A (geometric mean over seeds, its interval)
    out |= {k: claim.factor * math.exp(st[k]) for k in ('mean', 'lo', 'hi')}
  # A verdict its side's missed target blocks: A never reached it on a seed (agrees), B
  # (disagrees); an equivalence needs every seed of both.
  missed_a, missed_b = not a.reached.all(), not b.reached.all()
  m = math.log(1 + claim.margin) if claim.relative else claim.margin
  if claim.kind == 'equivalent':
    p_in = 2 * max(one_sided_p(d, -m, 'greater'), one_sided_p(d, m, 'less'))
    p_out = 2 * min(one_sided_p(d, m, 'greater'), one_sided_p(d, -m, 'less'))
    parts = [_part(STATEMENT, EQUIVALENT, p_in), _part(BEYOND, NOT_EQUIVALENT, p_out)]
    out['blocked'] = [EQUIVALENT, NOT_EQUIVALENT] if missed_a or missed_b else []
    needed = seeds_needed(m, st['sd'], over=abs(st['mean']))
  elif claim.kind == 'noninferior':  # A - B > -m against A - B < -m
    p, above = _two_sided(d, -m)
    parts = [_part(STATEMENT, AGREES if above else DISAGREES, p)]
    needed = seeds_needed(st['mean'] + m, st['sd'])
  else:
    parts = [_part(STATEMENT, AGREES if st['mean'] > 0 else DISAGREES, st['p'])]
    out['blocked'] = [AGREES] * missed_a + [DISAGREES] * missed_b
    needed = seeds_needed(st['mean'], st['sd']) if not claim.consistency else math.inf
    if claim.upper is not None:  # the effect below the bound (on the log scale for a ratio)
      bound = math.log(claim.upper / claim.factor) if out['ratio'] else claim.upper
      p_bound, above = _two_sided(d, bound)
      parts.append(_part(BOUND, DISAGREES if above else AGREES, p_bound))
      needed = max(needed, seeds_needed(st['mean'] - bound, st['sd']))
    effect = claim.paper_effect or 0  # out of reach: B's validation accuracy + it > the ceiling
    if effect > 0 and claim.metric.endswith('test_accuracy') and not claim.baseline:
      if chosen[claim.worse]['val'] + effect > ACCURACY_CEILING:
        out['not_comparable'] = True
    comparable = not (claim.incomparable or out.get('not_comparable'))
    paper_d = _paper(claim, a, b, d) if comparable else None
    if comparable and claim.consistency and (claim.paper_effect or 0) > 0:
      parts.append(_part(SIZE, SMALLER, 2 * _share(st['t'] >= claim.paper_effect)))
    elif paper_d is not None:
      parts.append(_part(SIZE, SMALLER, 2 * one_sided_p(paper_d, 0.0, 'less')))
  if claim.condition:
    accuracy = claim.metric if claim.metric in spec.ACCURACY_METRICS else 'test_accuracy'
    r, h = (values(label, accuracy).value.loc[seeds] for label in claim.condition)
    diff = (r - h).to_numpy(float)
    cond = paired(diff)
    ci = f'{cond["mean"]:+.3f} [{cond["lo"]:+.3f}, {cond["hi"]:+.3f}]'
    out['condition'] = f'{claim.condition[0]} - {claim.condition[1]} = {ci}'
    # Declared: the reference beats the harsh condition (differs from it, for consistency).
    p_cond = cond['p'] if claim.consistency else 2 * one_sided_p(diff, 0.0, 'greater')
    parts.append(_part(CONDITION, REPRODUCED, p_cond))
  out |= {'parts': parts, 'p': parts[0]['p'], 'needed': needed}
  out['verdict_raw'] = compose(out)
  # A bounded claim broken by too large an effect goes against B, which fell too far behind.
  bound_broken = parts[0]['verdict'] == AGREES and out['verdict_raw'] == DISAGREES
  against = _against(claim, AGREES if bound_broken else out['verdict_raw'], st['mean'])
  edges = [(label, chosen[label]['edges']) for label in against]
  return out | {'edges_against': [f'{label}: {", ".join(e)}' for label, e in edges if e]}


def compose(claim: Mapping, key: str = 'p') -> str:
  """A scored claim's verdict from its tests decided at p-value ``key`` ('p', BH's 'p_adj',
  Holm's 'p_holm') < ALPHA: condition, statement, bound, missed target, paper's size."""
  parts = {part['name']: part for part in claim['parts']}
  decided = lambda name: parts[name]['verdict'] if parts[name][key] < ALPHA else INCONCLUSIVE
  if CONDITION in parts and decided(CONDITION) != REPRODUCED:
    return NO_CONDITION
  verdict = decided(STATEMENT)
  if verdict == INCONCLUSIVE and BEYOND in parts:
    verdict = decided(BEYOND)
  if BOUND in parts and verdict in (AGREES, INCONCLUSIVE):
    bound = decided(BOUND)
    verdict = DISAGREES if bound == DISAGREES else verdict if bound == AGREES else INCONCLUSIVE
  if verdict in claim.get('blocked', ()):
    return MISSED
  if verdict == INCONCLUSIVE and claim.get('not_comparable'):
    verdict = NOT_COMPARABLE
  if SIZE in parts and decided(SIZE) == SMALLER:
    verdict = {AGREES: AGREES_SMALLER, INCONCLUSIVE: SMALLER}.get(verdict, verdict)
  return verdict


def _against(claim: spec.Claim, verdict: str, mean: float) -> tuple[str, ...]:
  a, b = (claim.better, *claim.baseline[:1]), (claim.worse, *claim.baseline[1:])
  if verdict in (AGREES, AGREES_SMALLER):
    return b
  if verdict in (DISAGREES, SMALLER) or (verdict == NOT_EQUIVALENT and mean < 0):
    return a
  return b if verdict == NOT_EQUIVALENT else ()


def speedup_log(a: np.ndarray, b: np.ndarray, factor: float = 1.0) -> np.ndarray:
  """Per-seed log(B / A) - log(factor): positive when A needs ``factor`` times less than B."""
  if np.any(a <= 0) or np.any(b <= 0):
    raise ValueError('a speedup needs positive values on every seed.')
  return np.log(b / a) - math.log(factor)


def _paper(claim: spec.Claim, a: pd.DataFrame, b: pd.DataFrame, d: np.ndarray):
  """Per-seed excess over the paper's effect where units carry over (accuracy, log speedup)."""
  effect = claim.paper_effect
  if effect is None or effect <= 0 or claim.consistency:
    return None
  if claim.metric.endswith('test_accuracy'):
    return d - effect
  if claim.metric in TO_TARGET and effect > 1.0 and claim.kind == 'better':
    return speedup_log(a.value.to_numpy(float), b.value.to_numpy(float), effect)
  return None


def holm(ps: Sequence[float]) -> np.ndarray:
  """Holm's step-down p-values: the i-th smallest of m times m - i + 1, running max, <= 1."""
  ps = np.asarray(ps, float)
  order = np.argsort(ps, kind='stable')
  out = np.empty(len(ps))
  out[order] = np.minimum(np.maximum.accumulate((len(ps) - np.arange(len(ps))) * ps[order]), 1.0)
  return out


def adjust(claims: list[dict]) -> list[dict]:
  """BH (``p_adj``) and Holm (``p_holm``) over every test of the claims; each claim gets its
  statement's and ``verdict``, ``verdict_holm``."""
  ps = [part['p'] for c in claims for part in c['parts']]
  bh = stats.false_discovery_control(ps, method='bh') if ps else []
  adjusted = iter([{'p_adj': float(a), 'p_holm': float(h)} for a, h in zip(bh, holm(ps))])
  out = []
  for c in claims:
    mine = [part | p for part, p in zip(c['parts'], adjusted)]
    c = c | {'parts': mine, 'p_adj': mine[0]['p_adj'], 'p_holm': mine[0]['p_holm']}
    out.append(c | {'verdict': compose(c, 'p_adj'), 'verdict_holm': compose(c, 'p_holm')})
  return out


def _short(setting: str) -> str:
  items = runs.setting_of(setting).items()
  return ', '.join(f'{k.rsplit(".", 1)[-1]}={v}' for k, v in items) or '—'


def mark(
  paper: spec.Paper,
  frame: pd.DataFrame,
  manifest: Sequence[Mapping],
  experiments: Sequence[str] | None = None,
) -> list[dict]:
  """``manifest`` with each sweep of ``experiments`` (default all) ``current`` where declared
  (a test sweep: at a setting its claims test on the current selection), else ``superseded``."""
  exps = {e.key: e for e in paper.experiments}
  keys = set(exps) | {m['experiment'] for m in manifest} if experiments is None else experiments
  current: set[int] = set()
  with runs.remembering():
    for exp in (exps[k] for k in set(keys) if k in exps):
      mine = [(i, m) for i, m in enumerate(manifest) if m['experiment'] == exp.key]
      chosen = [i for i, m in mine if m['phase'] == 'select' and runs.is_declared(exp, m)]
      current |= set(chosen)
      try:
        wanted = test_settings(exp, per_run(records.rows_of(frame, [manifest[i] for i in chosen])))
      except ValueError:  # a method without selection records: no test sweep is scored
        wanted = {}
      tested = {(label, key) for label, keys_ in wanted.items() for key in keys_}
      for i, m in mine:
        if m['phase'] == 'test' and (m['method'], m['setting']) in tested:
          current |= {i} if runs.is_declared(exp, m) else set()
  status = lambda i: {records.STATUS: 'current' if i in current else 'superseded'}
  return [
    dict(m) | status(i) if m['experiment'] in keys or records.STATUS not in m else dict(m)
    for i, m in enumerate(manifest)
  ]


def _stale(paper: spec.Paper, records_dir: str):
  """(records, :func:`mark`'s manifest, the sweeps whose stated status differs: all of an
  unmarked pair)."""
  frame, manifest = runs.read(paper.key, records_dir)
  fresh = mark(paper, frame, manifest)
  marked = records.marked(manifest)
  stale = [
    m for m, f in zip(manifest, fresh) if not marked or m[records.STATUS] != f[records.STATUS]
  ]
  return frame, fresh, [records.label(m) for m in stale]


def stale_status(paper: spec.Paper, records_dir: str = runs.RECORDS) -> list[str]:
  """The labels of the sweeps whose stated status is not :func:`mark`'s."""
  return _stale(paper, records_dir)[2]


def refresh(paper: spec.Paper, records_dir: str = runs.RECORDS) -> bool:
  """Rewrite ``paper``'s records with :func:`mark`'s statuses if any differs; whether it did."""
  frame, fresh, stale = _stale(paper, records_dir)
  if stale:
    runs.write(paper.key, frame, fresh, records_dir)
  return bool(stale)
