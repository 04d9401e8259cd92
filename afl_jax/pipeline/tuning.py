"""A tuning protocol whose verdicts can be defended.

One comparison of methods = for every method, the same grid budget (number of
hyperparameter settings) run with the same seeds (data split, schedule and init all
vary with the seed). Then:

1. :func:`select` picks each method's setting by the MEAN OVER SEEDS of a validation
   score (``val_accuracy``, higher is better; or ``time_to_target``, lower is better,
   ``inf`` when the target is never reached), never by test accuracy;
2. it reports the TEST score of that setting as mean ± std over the seeds (at least
   :data:`MIN_SEEDS`), and flags a selection on the edge of a swept numeric axis
   (the optimum may lie outside the grid: widen it);
3. :func:`check_budgets` refuses a comparison where methods got different grid sizes
   or seeds;
4. :func:`compare` says whether two methods differ beyond seed noise: a paired
   t-test over the common seeds (two-sided, ``alpha`` stated) and the mean
   difference measured against the seed spread.

Inputs are plain records, one per run: ``{'method': str, 'seed': int, 'hparams':
{axis: value}, 'val_accuracy': float, 'test_accuracy': float, ...}`` — what
:func:`afl_jax.pipeline.sweep.train_sweep` writes to ``summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from scipy import stats

MIN_SEEDS = 3
DEFAULT_ALPHA = 0.05


def _key(hparams: dict[str, Any]) -> str:
  return json.dumps(hparams, sort_keys=True, default=str)


@dataclasses.dataclass(frozen=True)
class Selection:
  """A method's selected setting and how it scores.

  Attributes:
    method: the method's name.
    hparams: the selected setting (swept axes -> value).
    metric: the selection score's name; ``score`` its mean over seeds.
    seeds: the seeds of the selected setting (sorted); ``test`` their test scores.
    test_mean, test_std: test score over seeds (std with ddof=1; nan for one seed).
    edges: swept numeric axes whose selected value is the grid's smallest ('low')
      or largest ('high') value.
    enough_seeds: at least :data:`MIN_SEEDS` seeds.
    grid_size: settings tried; ``scores`` the mean selection score of each.
  """

  method: str
  hparams: dict[str, Any]
  metric: str
  score: float
  seeds: tuple[int, ...]
  test: tuple[float, ...]
  test_mean: float
  test_std: float
  edges: dict[str, str]
  enough_seeds: bool
  grid_size: int
  scores: dict[str, float]

  def summary(self) -> str:
    """One line: the setting, test mean ± std (n seeds) and warnings."""
    hp = ', '.join(f'{k}={v}' for k, v in self.hparams.items())
    out = (
      f'{self.method}: {hp} -> test {self.test_mean:.4f} ± {self.test_std:.4f} '
      f'(n={len(self.seeds)} seeds; {self.metric} {self.score:.4f})'
    )
    if self.edges:
      out += ' [ON GRID EDGE: ' + ', '.join(f'{k} {v}' for k, v in self.edges.items()) + ']'
    if not self.enough_seeds:
      out += f' [FEWER THAN {MIN_SEEDS} SEEDS]'
    return out


def _std(x: Sequence[float]) -> float:
  return float(np.std(x, ddof=1)) if len(x) > 1 else math.nan


def grid(records: Iterable[dict], method: str | None = None) -> dict[str, list]:
  """The swept axes of ``method``'s records: axis -> sorted distinct values."""
  values: dict[str, set] = {}
  for rec in records:
    if method is not None and rec['method'] != method:
      continue
    for k, v in rec['hparams'].items():
      values.setdefault(k, set()).add(v if not isinstance(v, list) else tuple(v))
  return {k: sorted(v, key=lambda x: (str(type(x)), x)) for k, v in values.items()}


def _is_number(v: Any) -> bool:
  return isinstance(v, int | float | np.number) and not isinstance(v, bool)


def edges(hparams: dict[str, Any], axes: dict[str, list]) -> dict[str, str]:
  """Numeric axes with at least 2 values where ``hparams`` sits at the smallest or largest."""
  out = {}
  for k, values in axes.items():
    nums = [v for v in values if _is_number(v)]
    if len(nums) < 2 or len(nums) != len(values) or k not in hparams:
      continue
    if hparams[k] == min(nums):
      out[k] = 'low'
    elif hparams[k] == max(nums):
      out[k] = 'high'
  return out


def select(
  records: Iterable[dict],
  method: str,
  *,
  metric: str = 'val_accuracy',
  higher_is_better: bool = True,
  test_metric: str = 'test_accuracy',
) -> Selection:
  """``method``'s setting with the best mean over seeds of ``metric``.

  Args:
    records: run records (see the module docstring); other methods are ignored.
    method: the method to select for.
    metric: the selection score ('val_accuracy'; 'time_to_target' with
      ``higher_is_better=False``, ``inf`` = target never reached). Never a test score.
    higher_is_better: maximize (True) or minimize ``metric``.
    test_metric: the score reported for the selected setting.

  Raises:
    ValueError: no records for ``method``; settings run with different seeds; or
      ``metric`` is a test score.
  """
  if metric.startswith('test'):
    raise ValueError(f'select on a validation score, not on {metric!r} (a test score).')
  mine = [r for r in records if r['method'] == method]
  if not mine:
    raise ValueError(f'no records for method {method!r}.')
  by_setting: dict[str, list[dict]] = {}
  for rec in mine:
    by_setting.setdefault(_key(rec['hparams']), []).append(rec)
  seed_sets = {k: tuple(sorted(r['seed'] for r in v)) for k, v in by_setting.items()}
  if len(set(seed_sets.values())) != 1:
    raise ValueError(f'{method}: settings were run with different seeds: {seed_sets}.')
  scores = {k: float(np.mean([r[metric] for r in v])) for k, v in by_setting.items()}
  sign = 1.0 if higher_is_better else -1.0
  best = max(scores, key=lambda k: (sign * scores[k], -list(scores).index(k)))
  runs = sorted(by_setting[best], key=lambda r: r['seed'])
  test = tuple(float(r[test_metric]) for r in runs)
  hparams = dict(runs[0]['hparams'])
  return Selection(
    method=method,
    hparams=hparams,
    metric=metric,
    score=scores[best],
    seeds=tuple(r['seed'] for r in runs),
    test=test,
    test_mean=float(np.mean(test)),
    test_std=_std(test),
    edges=edges(hparams, grid(mine)),
    enough_seeds=len(runs) >= MIN_SEEDS,
    grid_size=len(by_setting),
    scores=scores,
  )


def check_budgets(records: Iterable[dict]) -> dict[str, int]:
  """Grid size per method; raises ValueError when methods got different budgets or seeds."""
  records = list(records)
  sizes, seeds = {}, {}
  for m in sorted({r['method'] for r in records}):
    mine = [r for r in records if r['method'] == m]
    sizes[m] = len({_key(r['hparams']) for r in mine})
    seeds[m] = tuple(sorted({r['seed'] for r in mine}))
  if len(set(sizes.values())) > 1:
    raise ValueError(
      f'unequal grid budgets (settings per method): {sizes}; give every method the same number.'
    )
  if len(set(seeds.values())) > 1:
    raise ValueError(f'methods were run with different seeds: {seeds}.')
  return sizes


@dataclasses.dataclass(frozen=True)
class Comparison:
  """Paired comparison of two selected methods over their common seeds.

  Attributes:
    a, b: method names; ``mean_diff`` = mean over seeds of (a - b) test scores.
    diff_std: std (ddof=1) of the paired differences.
    seed_spread: the larger of the two methods' test std over seeds.
    ratio: |mean_diff| / seed_spread (how many seed-stds apart).
    t, p_value: paired t statistic and its two-sided p-value (n - 1 dof).
    alpha: the test's level; ``significant`` = p_value < alpha.
    n: number of common seeds.
  """

  a: str
  b: str
  n: int
  mean_diff: float
  diff_std: float
  seed_spread: float
  ratio: float
  t: float
  p_value: float
  alpha: float
  significant: bool

  def summary(self) -> str:
    verdict = 'differ' if self.significant else 'do NOT differ'
    return (
      f'{self.a} - {self.b} = {self.mean_diff:+.4f} (paired over {self.n} seeds, '
      f't={self.t:.3f}, p={self.p_value:.4f}; {self.ratio:.2f} seed-std apart): '
      f'{verdict} beyond seed noise at alpha={self.alpha}.'
    )


def compare(a: Selection, b: Selection, *, alpha: float = DEFAULT_ALPHA) -> Comparison:
  """Whether ``a`` and ``b`` differ beyond seed noise (paired t-test over common seeds).

  Raises:
    ValueError: fewer than 2 common seeds.
  """
  sa, sb = dict(zip(a.seeds, a.test)), dict(zip(b.seeds, b.test))
  common = sorted(set(sa) & set(sb))
  if len(common) < 2:
    raise ValueError(f'need >= 2 common seeds to compare {a.method} and {b.method}; got {common}.')
  d = np.array([sa[s] - sb[s] for s in common])
  n, mean, sd = len(d), float(d.mean()), float(d.std(ddof=1))
  if sd == 0.0:
    t = math.inf if mean != 0 else 0.0
    p = 0.0 if mean != 0 else 1.0
  else:
    t = mean / (sd / math.sqrt(n))
    p = float(2.0 * stats.t.sf(abs(t), df=n - 1))
  spread = max(_std([sa[s] for s in common]), _std([sb[s] for s in common]))
  ratio = abs(mean) / spread if spread > 0 else (math.inf if mean else 0.0)
  return Comparison(
    a=a.method,
    b=b.method,
    n=n,
    mean_diff=mean,
    diff_std=sd,
    seed_spread=spread,
    ratio=ratio,
    t=float(t),
    p_value=p,
    alpha=alpha,
    significant=p < alpha,
  )


def report(records: Sequence[dict], *, alpha: float = DEFAULT_ALPHA, **select_kw) -> str:
  """Markdown: budgets, each method's selection, and every pairwise comparison."""
  sizes = check_budgets(records)
  sels = [select(records, m, **select_kw) for m in sizes]
  lines = [
    '| method | selected | test (mean ± std) | seeds | grid | warnings |',
    '|---|---|---|---|---|---|',
  ]
  for s in sels:
    warn = ', '.join(f'{k} on {v} edge' for k, v in s.edges.items())
    if not s.enough_seeds:
      warn = (warn + '; ' if warn else '') + f'< {MIN_SEEDS} seeds'
    hp = ', '.join(f'{k}={v}' for k, v in s.hparams.items())
    lines.append(
      f'| {s.method} | {hp} | {s.test_mean:.4f} ± {s.test_std:.4f} | {len(s.seeds)} | '
      f'{s.grid_size} | {warn} |'
    )
  lines.append('')
  for i, a in enumerate(sels):
    for b in sels[i + 1 :]:
      lines.append('- ' + compare(a, b, alpha=alpha).summary())
  return '\n'.join(lines) + '\n'
