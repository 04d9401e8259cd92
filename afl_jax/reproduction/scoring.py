"""Select on validation over the selection seeds; score every claim on the test seeds.

Each method's setting is the one with the best mean final validation accuracy (a selection
on a grid edge stops the test phase: :func:`settings_to_test`); each claim is a paired test
on the test seeds (:func:`score_claim`; a speedup on the log scale), its verdict composed
from the tests that stay decided after the Benjamini-Hochberg and Holm adjustments
(:func:`adjust`). The protocol, stated once: docs/results/protocol.md (in the summary,
docs/results/README.md#protocol).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from afl_jax.errors import UserError
from afl_jax.reproduction import records, runs, spec
from afl_jax.results import ALPHA, one_sided_p, paired, seeds_needed  # the one implementation

# An accuracy effect of the paper is comparable here only if the level it asks of A (B's
# mean + the effect) stays below this: a CIFAR-10 gap of 20 points on top of an 80%
# Fashion-MNIST baseline needs > 99% and no outcome could show it.
ACCURACY_CEILING = 0.99
DEFAULT_TARGET_FRACTION = 0.9
TO_TARGET = {  # metric -> (record column, scale to the page's unit)
  'steps_to_target': ('step', 1.0),
  'clock_to_target': ('wall_clock', 1.0),
  'mb_to_target': ('bytes_up', 1e-6),
}


def finals(frame: pd.DataFrame) -> pd.DataFrame:
  """The last evaluation of every run; a run with a non-finite score is ``diverged`` and
  scores 0."""
  runs_ = frame.sort_values('step', kind='stable').groupby(
    ['experiment', 'method', 'phase', 'setting', 'seed']
  )
  out = runs_.tail(1).copy()
  # A run has a validation split when its first evaluation has a validation score.
  has_val = runs_['val_accuracy'].transform('first').loc[out.index].notna()
  bad = ~np.isfinite(out[['test_accuracy', 'test_loss']].to_numpy(float)).all(axis=1)
  bad |= has_val & ~np.isfinite(out[['val_accuracy', 'val_loss']].to_numpy(float)).all(axis=1)
  out['diverged'] = bad
  out.loc[bad, ['val_accuracy', 'test_accuracy']] = 0.0
  return out.reset_index(drop=True)


def rows(frame: pd.DataFrame, exp_key: str, label: str, phase: str, setting: str | None = None):
  """The rows of ``label`` in one phase of ``exp_key`` (at one ``setting``, if given)."""
  mine = (frame.experiment == exp_key) & (frame.method == label) & (frame.phase == phase)
  return frame[mine & (frame.setting == setting) if setting is not None else mine]


def _matches(key: str, at: Mapping[str, Any]) -> bool:
  setting = runs.setting_of(key)
  return all(setting.get(k) == (list(v) if isinstance(v, tuple) else v) for k, v in at.items())


def select(fin: pd.DataFrame, exp_key: str, label: str, at: Mapping[str, Any] = ()) -> dict:
  """``label``'s validation-selected setting in ``exp_key`` (within ``at`` on the fields it
  sweeps): ``{'setting', 'val', 'scores' (setting -> mean val), 'edges'}``, a tie to the
  first setting key in sorted order; ValueError without selection records."""
  mine = rows(fin, exp_key, label, 'select')
  swept = {field for k in mine.setting.unique() for field in runs.setting_of(k)}
  at = {field: v for field, v in dict(at).items() if field in swept}
  mine = mine[[_matches(k, at) for k in mine.setting]]
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
  """Swept numeric fields whose selected value is the smallest or largest tried."""
  chosen = runs.setting_of(best)
  tried = [runs.setting_of(k) for k in mine.setting.unique()]
  out = []
  for field, value in chosen.items():
    # A list-valued axis (e.g. a staleness window [5, 10]) is ordered as tuples.
    values = sorted({tuple(t[field]) if isinstance(t[field], list) else t[field] for t in tried})
    value = tuple(value) if isinstance(value, list) else value
    if not all(isinstance(v, int | float | tuple) for v in values):
      continue
    if len(values) > 1 and value in (values[0], values[-1]):
      out.append(f'{field.rsplit(".", 1)[-1]} on {"low" if value == values[0] else "high"} edge')
  return out


def selected_test(exp: spec.Experiment, frame: pd.DataFrame, fin: pd.DataFrame, label: str):
  """``label``'s selected setting, and its rows of ``frame`` on the test seeds."""
  key = select(fin, exp.key, label)['setting']
  return key, rows(frame, exp.key, label, 'test', key)


def selections(exp: spec.Experiment, fin: pd.DataFrame) -> list[tuple[str, dict]]:
  """(method label, :func:`select`) of every selection the claims score, each setting once:
  every method's overall selection, and its selection under each ``at`` restriction."""
  out = [(m.label, select(fin, exp.key, m.label)) for m in exp.methods]
  for claim in exp.claims:
    for label in (claim.better, claim.worse, *claim.baseline, *claim.condition) if claim.at else ():
      chosen = select(fin, exp.key, label, claim.at)
      if (label, chosen['setting']) not in {(k, s['setting']) for k, s in out}:
        out.append((label, chosen))
  return out


def test_settings(exp: spec.Experiment, fin: pd.DataFrame) -> dict[str, list[str]]:
  """Method -> the settings its claims score on the test seeds (:func:`selections`)."""
  out: dict[str, list[str]] = {m.label: [] for m in exp.methods}
  for label, chosen in selections(exp, fin):
    out[label].append(chosen['setting'])
  return out


def open_edges(exp: spec.Experiment, fin: pd.DataFrame) -> list[str]:
  """The selections on an edge of their grid that ``exp`` does not keep (``edges_kept``):
  '<method> (<setting>): <field> on <side> edge'."""
  return [
    f'{label} ({_short(chosen["setting"])}): {", ".join(chosen["edges"])}'
    for label, chosen in selections(exp, fin)
    if chosen['edges'] and label not in exp.edges_kept
  ]


def settings_to_test(
  paper_key: str, exp: spec.Experiment, records_dir: str = runs.RECORDS
) -> dict[str, list[str]]:
  """:func:`test_settings` on the current selection records; UserError (one line naming
  each) while a selection sits on an edge of its grid that the experiment does not keep."""
  fin = finals(runs.current(exp, *runs.read(paper_key, records_dir)))
  edges = open_edges(exp, fin)
  if edges:
    raise UserError(
      f'{paper_key}/{exp.key}: selected on an edge of its grid: {"; ".join(edges)}; extend '
      'the grid past it (the selection runs again) before the test runs, or say why not '
      "in the experiment's edges_kept"
    )
  return test_settings(exp, fin)


def target_of(exp: spec.Experiment, fin: pd.DataFrame) -> float:
  """``exp.target``, else 90% of the median over methods of the selected settings' mean
  final validation accuracy, rounded down to a whole percent (diverged methods left out)."""
  if exp.target is not None:
    return exp.target
  means = [select(fin, exp.key, m.label)['val'] for m in exp.methods]
  means = [m for m in means if math.isfinite(m) and m > 0]
  if not means:
    return 1.0
  return math.floor(100 * DEFAULT_TARGET_FRACTION * float(np.median(means))) / 100


def per_seed(
  frame: pd.DataFrame,
  fin: pd.DataFrame,
  exp_key: str,
  label: str,
  setting: str,
  metric: str,
  target: float,
) -> pd.DataFrame:
  """Per test seed of ``label`` at ``setting``: ``value`` of ``metric`` and ``reached`` (a
  to-target value at the first evaluation reaching ``target``, else at the last: a bound)."""
  mine = rows(fin, exp_key, label, 'test', setting).set_index('seed').sort_index()
  if metric == 'test_accuracy':
    return pd.DataFrame({'value': mine.test_accuracy, 'reached': True})
  if metric == 'best_test_accuracy':  # the best evaluation of the run (a paper's "best")
    curves = rows(frame, exp_key, label, 'test', setting)
    best = curves.groupby('seed').test_accuracy.max().reindex(mine.index)
    return pd.DataFrame({'value': best.fillna(0.0), 'reached': True})
  if metric == 'diverged':
    return pd.DataFrame({'value': mine.diverged.astype(float), 'reached': True})
  out = {}
  curves = rows(frame, exp_key, label, 'test', setting)
  for seed, curve in curves.sort_values('step').groupby('seed'):
    hit = curve[curve.test_accuracy >= target]
    row = hit.iloc[0] if len(hit) else curve.iloc[-1]
    if metric == 'not_reached':
      out[seed] = (float(hit.empty), True)
    else:
      column, scale = TO_TARGET[metric]
      out[seed] = (float(row[column]) * scale, not hit.empty)
  return pd.DataFrame.from_dict(out, orient='index', columns=['value', 'reached']).sort_index()


AGREES, DISAGREES, INCONCLUSIVE = 'agrees', 'disagrees', 'inconclusive'
SMALLER = "smaller than the paper's effect"
AGREES_SMALLER = f'agrees, {SMALLER}'
EQUIVALENT = 'equivalent within the margin'
NOT_EQUIVALENT = 'disagrees (differ by more than the margin)'
NO_CONDITION = 'condition not reproduced'
NOT_COMPARABLE = "not comparable (the paper's effect is out of reach here)"
MISSED = 'inconclusive: target not reached'
VERDICTS = (
  AGREES,
  AGREES_SMALLER,
  EQUIVALENT,
  SMALLER,
  DISAGREES,
  NOT_EQUIVALENT,
  NO_CONDITION,
  NOT_COMPARABLE,
  MISSED,
  INCONCLUSIVE,
)
DECIDED = (AGREES, AGREES_SMALLER, EQUIVALENT, SMALLER, DISAGREES, NOT_EQUIVALENT)
# The tests a verdict rests on, each adjusted on its own: the statement, its bound, the size.
STATEMENT, BOUND, SIZE = 'statement', 'bound', "paper's size"


def _part(name: str, verdict: str, p: float) -> dict:
  return {'name': name, 'verdict': verdict, 'p': p}


def _decide(p_in: float, p_out: float, yes: str, no: str) -> tuple[str, float]:
  """(``yes``, p_in) when p_in < ALPHA, else (``no``, p_out) when p_out < ALPHA, else
  inconclusive at p_in."""
  return (yes, p_in) if p_in < ALPHA else (no, p_out) if p_out < ALPHA else (INCONCLUSIVE, p_in)


def score_claim(
  exp: spec.Experiment, claim: spec.Claim, frame: pd.DataFrame, fin: pd.DataFrame, target: float
) -> dict:
  """One claim on the test seeds: the paired difference (positive favours the claim: A - B,
  log(B / A) - log(factor) for a speedup, the drops for a baseline claim), its interval,
  the tests (``parts``) its raw verdict rests on, each with its p-value."""
  higher = spec.METRICS[claim.metric][1]

  def values(label, metric=claim.metric):
    setting = select(fin, exp.key, label, claim.at)['setting']
    return setting, per_seed(frame, fin, exp.key, label, setting, metric, target)

  (sa, a), (sb, b) = values(claim.better), values(claim.worse)
  shown = ('ref', 'text', 'quote', 'kind', 'metric', 'margin', 'upper', 'factor')
  shown += ('paper_effect', 'source', 'outside', 'restated', 'consistency', 'baseline')
  out = {
    'experiment': exp.key,
    **{field: getattr(claim, field) for field in shown},
    'A': claim.better,
    'B': claim.worse,
    'A_setting': _short(sa),
    'B_setting': _short(sb),
    'target': target if claim.metric in (*TO_TARGET, 'not_reached') else None,
  }
  seeds = a.index.intersection(b.index)
  a, b = a.loc[seeds], b.loc[seeds]
  for side, v in (('A', a), ('B', b)):
    hit = v.value[v.reached.astype(bool)]  # a to-target value over the seeds that reached it
    out[f'{side}_mean'], out[f'{side}_sd'] = float(v.value.mean()), float(v.value.std(ddof=1))
    out[f'{side}_reached'] = int(v.reached.sum())
    out[f'{side}_reached_mean'] = float(hit.mean()) if len(hit) else math.nan
  out |= {'n': len(seeds), 'ratio': False}
  if claim.kind == 'on_seeds':
    k, n = int(a.value.sum()), len(a)
    verdict = AGREES if k == n else DISAGREES if k == 0 else INCONCLUSIVE
    alt = 'greater' if k * 2 >= n else 'less'
    p = float(stats.binomtest(k, n, 0.5, alternative=alt).pvalue)
    ci = stats.binomtest(k, n).proportion_ci()  # Clopper-Pearson, for the plot
    out |= {'mean': k / n, 'sd': math.nan, 'lo': float(ci.low), 'hi': float(ci.high)}
    out |= {'parts': [_part(STATEMENT, verdict, p)], 'needed': math.inf, 'edges_against': []}
    return out | {'p': p, 'verdict_raw': compose(out)}
  if claim.baseline:  # the change from the other condition (A0, B0) to this one (A, B)
    (_, a0), (_, b0) = values(claim.baseline[0]), values(claim.baseline[1])
    a0, b0 = a0.value.loc[seeds], b0.value.loc[seeds]
    out['conditions'] = {claim.baseline[0]: a0.mean(), claim.better: a.value.mean()}
    out['conditions'] |= {claim.baseline[1]: b0.mean(), claim.worse: b.value.mean()}
    da, db = a0 - a.value, b0 - b.value
    d = db.abs() - da.abs() if claim.consistency else db - da
  elif higher or claim.kind in ('equivalent', 'noninferior'):
    d = a.value - b.value
  else:
    d = speedup_log(a.value.to_numpy(float), b.value.to_numpy(float), claim.factor)
    out['ratio'] = True
  d = np.asarray(d, float)
  st = paired(d)
  out |= {k: st[k] for k in ('mean', 'sd', 'lo', 'hi')}
  if out['ratio']:  # shown as the ratio B / A (geometric mean over seeds, its interval)
    out |= {k: claim.factor * math.exp(st[k]) for k in ('mean', 'lo', 'hi')}
  missed = not (a.reached.all() and b.reached.all())
  m = claim.margin
  if claim.kind == 'equivalent':
    p_in = max(one_sided_p(d, -m, 'greater'), one_sided_p(d, m, 'less'))
    p_out = one_sided_p(d, m, 'greater') if st['mean'] > 0 else one_sided_p(d, -m, 'less')
    verdict, p = (MISSED, p_in) if missed else _decide(p_in, p_out, EQUIVALENT, NOT_EQUIVALENT)
    parts = [_part(STATEMENT, verdict, p)]
    needed = seeds_needed(m, st['sd'], over=abs(st['mean']), two_sided=False)
  elif claim.kind == 'noninferior':  # A - B > -m
    p_in, p_out = one_sided_p(d, -m, 'greater'), one_sided_p(d, -m, 'less')
    verdict, p = _decide(p_in, p_out, AGREES, DISAGREES)
    parts = [_part(STATEMENT, verdict, p)]
    needed = seeds_needed(st['mean'] + m, st['sd'], two_sided=False)
  else:
    p = st['p']
    verdict = INCONCLUSIVE
    if p < ALPHA:
      verdict = AGREES if st['mean'] > 0 else DISAGREES
    if (verdict == AGREES and not a.reached.all()) or (
      verdict == DISAGREES and not b.reached.all()
    ):
      verdict = MISSED
    parts = [_part(STATEMENT, verdict, p)]
    if claim.upper is not None:  # the effect below the bound (on the log scale for a ratio)
      bound = math.log(claim.upper / claim.factor) if out['ratio'] else claim.upper
      below = st['mean'] < bound
      p_bound = one_sided_p(d, bound, 'less' if below else 'greater')
      decided = AGREES if below else DISAGREES
      parts.append(_part(BOUND, decided if p_bound < ALPHA else INCONCLUSIVE, p_bound))
      needed = seeds_needed(st['mean'] - bound, st['sd'], two_sided=False)
    paper_d = _against_paper(claim, a.value, b.value, d)
    if _out_of_reach(claim, out['B_mean']) and verdict in (AGREES, INCONCLUSIVE):
      paper_d = None
      out['not_comparable'] = True
    if paper_d is not None and verdict in (AGREES, INCONCLUSIVE):
      p_small = one_sided_p(paper_d, 0.0, 'less')
      parts.append(_part(SIZE, SMALLER if p_small < ALPHA else INCONCLUSIVE, p_small))
    needed = max(seeds_needed(st['mean'], st['sd']), needed if claim.upper is not None else 0)
  if claim.condition:
    accuracy = claim.metric if claim.metric in spec.ACCURACY_METRICS else 'test_accuracy'
    _, r = values(claim.condition[0], accuracy)
    _, h = values(claim.condition[1], accuracy)
    cond = paired((r.value - h.value).dropna().to_numpy(float))
    ci = f'{cond["mean"]:+.3f} [{cond["lo"]:+.3f}, {cond["hi"]:+.3f}]'
    out['condition'] = f'{claim.condition[0]} - {claim.condition[1]} = {ci}'
    if not (cond['p'] < ALPHA and (claim.consistency or cond['mean'] > 0)):
      parts = [_part(STATEMENT, NO_CONDITION, math.nan)]
  out |= {'parts': parts, 'p': parts[0]['p'], 'needed': needed}
  out['verdict_raw'] = compose(out)
  # A bounded claim broken by too large an effect goes against B, which fell too far behind.
  bound_broken = parts[0]['verdict'] == AGREES and out['verdict_raw'] == DISAGREES
  against = _against(claim, AGREES if bound_broken else out['verdict_raw'], st['mean'])
  edges = [(label, select(fin, exp.key, label, claim.at)['edges']) for label in against]
  return out | {'edges_against': [f'{label}: {", ".join(e)}' for label, e in edges if e]}


def compose(claim: Mapping, key: str = 'p') -> str:
  """The verdict of a scored claim from its parts, each decided only when its p-value
  ``key`` ('p' raw, 'p_adj' after BH, 'p_holm' after Holm) is below ALPHA."""

  def decided(part):
    v = part['verdict']
    return v if v not in DECIDED or part[key] < ALPHA else INCONCLUSIVE

  parts = claim['parts']
  verdict = decided(parts[0])
  bounds = [decided(part) for part in parts[1:] if part['name'] == BOUND]
  if bounds and verdict in (AGREES, DISAGREES, INCONCLUSIVE):
    verdict = (
      DISAGREES
      if DISAGREES in (verdict, *bounds)
      else AGREES
      if {verdict, *bounds} == {AGREES}
      else INCONCLUSIVE
    )
  if verdict == INCONCLUSIVE and claim.get('not_comparable'):
    verdict = NOT_COMPARABLE
  if any(decided(part) == SMALLER for part in parts[1:] if part['name'] == SIZE):
    verdict = {AGREES: AGREES_SMALLER, INCONCLUSIVE: SMALLER}.get(verdict, verdict)
  return verdict


def _against(claim: spec.Claim, verdict: str, mean: float) -> tuple[str, ...]:
  """The methods a decided verdict goes against (the side that lost, with its reference
  condition for a claim across conditions): were one tuned on a grid edge, a wider grid
  might move the verdict, so the page says so beside it."""
  a = (claim.better, *claim.baseline[:1])
  b = (claim.worse, *claim.baseline[1:])
  if verdict in (AGREES, AGREES_SMALLER):
    return b
  if verdict in (DISAGREES, SMALLER) or (verdict == NOT_EQUIVALENT and mean < 0):
    return a
  return b if verdict == NOT_EQUIVALENT else ()


def speedup_log(a: np.ndarray, b: np.ndarray, factor: float = 1.0) -> np.ndarray:
  """Per-seed log(B / A) - log(factor): positive when A needs ``factor`` times less than
  B (A, B > 0: steps, seconds or MB to a target, all positive after the first step)."""
  if np.any(a <= 0) or np.any(b <= 0):
    raise ValueError('a speedup needs positive values on every seed.')
  return np.log(b / a) - math.log(factor)


def _out_of_reach(claim: spec.Claim, b_mean: float) -> bool:
  """Whether the paper's accuracy effect asks more of A than ACCURACY_CEILING (B + effect)."""
  effect = claim.paper_effect
  if effect is None or effect <= 0 or not claim.metric.endswith('test_accuracy'):
    return False
  return not claim.baseline and b_mean + effect > ACCURACY_CEILING


def _against_paper(claim: spec.Claim, a: pd.Series, b: pd.Series, d: np.ndarray):
  """Per-seed excess over the paper's own effect (negative: smaller than the paper's),
  where the units carry over: an accuracy difference (or difference of drops), or a
  speedup ratio B / A (log(B / A) - log(paper ratio)). None otherwise: a paper effect
  that is not in the claim's direction (the paper's own table disagrees with its text;
  the page quotes both)."""
  effect = claim.paper_effect
  if effect is None or effect <= 0:
    return None
  if claim.metric.endswith('test_accuracy'):
    return d - effect
  if claim.metric in TO_TARGET and effect > 1.0:
    return speedup_log(a.to_numpy(float), b.to_numpy(float), effect)
  return None


def holm(ps: Sequence[float]) -> np.ndarray:
  """Holm's step-down adjusted p-values: the i-th smallest of m is multiplied by
  m - i + 1 (i from 1), made non-decreasing in that order, and capped at 1."""
  ps = np.asarray(ps, float)
  order = np.argsort(ps, kind='stable')
  m = len(ps)
  stepped = np.maximum.accumulate((m - np.arange(m)) * ps[order])
  out = np.empty(m)
  out[order] = np.minimum(stepped, 1.0)
  return out


def adjust(claims: list[dict]) -> list[dict]:
  """Benjamini-Hochberg and Holm over the finite p-values of every test of the claims; each
  part keeps its ``p_adj`` and ``p_holm``, the claim its statement's and its verdicts after
  each (``verdict``, ``verdict_holm``: :func:`compose`)."""
  parts = [part | {'p_adj': math.nan, 'p_holm': math.nan} for c in claims for part in c['parts']]
  finite = [part for part in parts if math.isfinite(part['p'])]
  ps = [part['p'] for part in finite]
  for part, p_adj, p_holm in zip(
    finite, stats.false_discovery_control(ps, method='bh') if ps else [], holm(ps)
  ):
    part |= {'p_adj': float(p_adj), 'p_holm': float(p_holm)}
  out, it = [], iter(parts)
  for c in claims:
    mine = [next(it) for _ in c['parts']]
    c = c | {'parts': mine, 'p_adj': mine[0]['p_adj'], 'p_holm': mine[0]['p_holm']}
    out.append(c | {'verdict': compose(c, 'p_adj'), 'verdict_holm': compose(c, 'p_holm')})
  return out


def _short(setting: str) -> str:
  items = runs.setting_of(setting).items()
  return ', '.join(f'{k.rsplit(".", 1)[-1]}={v}' for k, v in items) or '—'


def mark(paper: spec.Paper, frame: pd.DataFrame, manifest: Sequence[Mapping]) -> list[dict]:
  """``manifest`` with each sweep's status as ``paper`` declares it now: ``current`` for a
  selection sweep it gives (:func:`~afl_jax.reproduction.runs.is_current`) and a test sweep
  it gives at a setting the claims test (:func:`test_settings`), else ``superseded``."""
  exps = {e.key: e for e in paper.experiments}
  tested = {}
  for exp in paper.experiments:
    rows = runs.current(exp, frame, manifest)
    try:
      wanted = test_settings(exp, finals(rows)) if len(rows) else {}
    except ValueError:  # a method without selection records: no test sweep is scored
      wanted = {}
    tested[exp.key] = {(label, key) for label, keys in wanted.items() for key in keys}

  def status(m: Mapping) -> str:
    exp = exps.get(m['experiment'])
    used = m['phase'] == 'select' or (m['method'], m['setting']) in tested.get(m['experiment'], ())
    return 'current' if exp is not None and used and runs.is_current(exp, m) else 'superseded'

  return [dict(m) | {records.STATUS: status(m)} for m in manifest]


def stale_status(paper: spec.Paper, records_dir: str = runs.RECORDS) -> list[str]:
  """The labels of the sweeps whose stated status is not the one :func:`mark` gives now
  (every sweep of an unmarked pair)."""
  frame, manifest = runs.read(paper.key, records_dir)
  fresh = mark(paper, frame, manifest)
  if not records.marked(manifest):
    return [records.label(m) for m in manifest]
  status = records.STATUS
  return [records.label(m) for m, f in zip(manifest, fresh) if m[status] != f[status]]


def refresh(paper: spec.Paper, records_dir: str = runs.RECORDS) -> bool:
  """Rewrite ``paper``'s records with :func:`mark`'s statuses if any differs; whether it wrote."""
  if not stale_status(paper, records_dir):
    return False
  frame, manifest = runs.read(paper.key, records_dir)
  runs.write(paper.key, frame, mark(paper, frame, manifest), records_dir)
  return True
