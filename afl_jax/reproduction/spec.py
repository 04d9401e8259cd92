"""The vocabulary of ``configs/repro/<paper>.py``: a :class:`Paper`'s experiments, their
methods tuned on equal grids, held-out test seeds and claims (docs/extending.md, section g).
Fields are dotted config paths (``'hparams.server_lr'``)."""

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_collections
from ml_collections.config_flags import config_path

# configs/ of the checkout the scripts run from ($AFL_JAX_CHECKOUT), else of this package's.
CONFIGS = os.path.join(
  os.environ.get('AFL_JAX_CHECKOUT')
  or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
  'configs',
)
_field = lambda: dataclasses.field(default_factory=dict)  # noqa: E731


@dataclasses.dataclass(frozen=True)
class Method:
  """``config`` (``'FILE:NAME'``) with ``fixed`` set on top, tuned on ``grid``; ``untuned``:
  field -> why this method lacks an axis the others sweep (same count on the rest)."""

  label: str
  config: str
  grid: Mapping[str, Sequence[Any]]
  fixed: Mapping[str, Any] = _field()
  untuned: Mapping[str, str] = _field()

  @property
  def budget(self) -> int:
    return math.prod(len(v) for v in self.grid.values())

  def variant(self, fixed: Mapping[str, Any] = {}, **changes) -> 'Method':
    """This method with ``fixed`` added to its own fields, and ``changes`` (label, grid)."""
    return dataclasses.replace(self, fixed={**self.fixed, **fixed}, **changes)


# Claim metrics: name -> (what the page calls it, higher is better, unit). *_to_target: at
# the first evaluation reaching the experiment's target; 'diverged', 'not_reached': events.
METRICS = {
  'test_accuracy': ('final test accuracy', True, 'accuracy'),
  'best_test_accuracy': ('best test accuracy', True, 'accuracy'),
  'steps_to_target': ('server steps to target', False, 'steps'),
  'clock_to_target': ('simulated seconds to target', False, 's'),
  'mb_to_target': ('MB uploaded to target', False, 'MB'),
  'diverged': ('diverged (non-finite loss)', True, 'seeds'),
  'not_reached': ('never reached the target', True, 'seeds'),
}
KINDS = ('better', 'equivalent', 'noninferior', 'on_seeds')
ACCURACY_METRICS = ('test_accuracy', 'best_test_accuracy')


@dataclasses.dataclass(frozen=True)
class Claim:
  """A statement of the paper (``quote`` at ``ref``) that A (``better``) beats B (``worse``)
  on ``metric``, paired over the test seeds as ``kind`` says (docs/results/protocol.md)."""

  ref: str
  text: str  # the claim as tested here (short; names the methods)
  better: str
  worse: str
  quote: str = ''
  # Positive favours the claim: A - B, B / A (to a target), the drops' difference (baseline).
  paper_effect: float | None = None
  source: str = ''  # where paper_effect is read
  incomparable: str = ''  # why paper_effect is not comparable here ('' = it is)
  at: Mapping[str, Any] = _field()  # select within these values (methods sweeping the field)
  metric: str = 'test_accuracy'
  kind: str = 'better'
  margin: float | None = None  # in the metric's units (accuracy 0.02 = 2 points)
  relative: bool = False  # a to-target margin as a share of B (on log(B / A))
  upper: float | None = None  # 'better' only: A - B (or B / A) below it too
  factor: float = 1.0  # 'better', lower-is-better: A needs factor x less than B
  baseline: tuple[str, str] = ()  # (A0, B0): drops A0 - A against B0 - B
  consistency: bool = False  # the drops' sizes compared (paired bootstrap)
  equal_time: bool = False  # best accuracy within the simulated time both runs of a pair cover
  condition: tuple[str, str] = ()  # (R, H): R must beat H, else "condition not reproduced"
  outside: str = ''  # why it is scored outside the tally ('' = in it)
  restated: str = ''  # how and why it was restated against the paper's passage


@dataclasses.dataclass(frozen=True)
class Experiment:
  """One figure or table: ``methods`` on one setting (``base`` applied after each method's
  fields), tuned on ``seeds`` (>= 3), scored on ``test_seeds`` (>= 10, disjoint). ``looked``:
  test seeds seen before the declaration took its form (exploratory while one is in use)."""

  key: str
  title: str
  ref: str
  setting: str
  base: Callable[[ml_collections.ConfigDict], None]
  methods: Sequence[Method]
  claims: Sequence[Claim] = ()
  seeds: Sequence[int] = (0, 1, 2)
  test_seeds: Sequence[int] = tuple(range(3, 13))
  deviations: Sequence[str] = ()
  run: bool = True
  target: float | None = None
  second_look: str = ''
  extended: str = ''
  looked: Sequence[int] = ()
  edges_kept: Mapping[str, str] = _field()
  beside: str = ''

  @property
  def exploratory(self) -> bool:
    return bool(set(self.test_seeds) & set(self.looked))


@dataclasses.dataclass(frozen=True)
class Paper:
  key: str
  number: str
  citation: str
  setting: str
  experiments: Sequence[Experiment]


def load_config(name: str) -> ml_collections.ConfigDict:
  """The config ``configs/FILE.py:NAME`` named ``'FILE:NAME'`` (``'FILE'``: ``get_config()``)."""
  from afl_jax.pipeline import config as config_lib

  file, _, entry = name.partition(':')
  path = os.path.join(CONFIGS, f'{file}.py')
  return config_lib.load_file(f'{path}:{entry}' if entry else path)


def _set(c: ml_collections.ConfigDict, field: str, value: Any) -> None:
  config_path.set_value(field, c, value, accept_new_attributes=True)


def with_fields(base, fields: Mapping[str, Any] = {}, keep: Sequence[str] = ()):
  """``base`` then the dotted ``fields``, leaving the fields of ``keep`` as the method set them."""

  def apply(c: ml_collections.ConfigDict) -> None:
    saved = {field: config_path.get_value(field, c) for field in keep}
    base(c)
    for field, value in {**fields, **saved}.items():
      _set(c, field, value)

  return apply


def nest(flat: Mapping[str, Sequence[Any]]) -> dict:
  """``{'hparams.server_lr': [..]}`` -> ``{'hparams': {'server_lr': [..]}}`` (config.sweep)."""
  out: dict = {}
  for field, values in flat.items():
    *path, last = field.split('.')
    node = out
    for part in path:
      node = node.setdefault(part, {})
    node[last] = list(values)
  return out


def sweep_config(exp: Experiment, method: Method) -> ml_collections.ConfigDict:
  """``method``'s config, fixed fields and ``exp.base``, its grid x the selection seeds."""
  c = load_config(method.config)
  for field, value in method.fixed.items():
    _set(c, field, value)
  exp.base(c)
  c.sweep = ml_collections.ConfigDict(nest({**method.grid, 'seed': exp.seeds}))
  return c


def _budget_errors(exp: Experiment):
  tuned = [m for m in exp.methods if not m.untuned]
  budgets = {m.label: m.budget for m in tuned}
  if len(set(budgets.values())) > 1:
    yield f'unequal grid budgets {budgets}.'
  for m in (m for m in exp.methods if m.untuned):
    if not tuned or any(set(m.grid) | set(m.untuned) != set(o.grid) for o in tuned):
      axes = f'{sorted(m.grid)} and leaves {sorted(m.untuned)} untuned'
      yield f'{m.label} sweeps {axes}: not the axes of the other methods.'
    for field, values in m.grid.items():
      if counts := {len(o.grid[field]) for o in tuned} - {len(values)}:
        others = f'the other methods {sorted(counts)}'
        yield f'{m.label} tries {len(values)} values of {field}, {others}.'


def _claim_errors(c: Claim, grids: Mapping[str, Mapping]):
  names = (c.better, c.worse, *c.baseline, *c.condition)
  if unknown := [n for n in names if n not in grids]:
    yield f'names unknown method {unknown[0]!r}.'
    return
  higher = METRICS.get(c.metric, ('', True))[1]
  margined = c.kind in ('equivalent', 'noninferior')
  ratio = c.kind == 'better' and not higher and not c.baseline
  rules = (
    (c.metric not in METRICS, f'metric {c.metric!r} not in {sorted(METRICS)}.'),
    (c.kind not in KINDS, f'kind {c.kind!r} not in {KINDS}.'),
    (
      (c.kind == 'on_seeds') != (c.metric in ('diverged', 'not_reached')),
      "kind 'on_seeds' goes with metric 'diverged' or 'not_reached'.",
    ),
    (
      c.baseline
      and (len(c.baseline) != 2 or c.metric not in ACCURACY_METRICS or c.kind != 'better'),
      'a baseline is (A0, B0), for "better" on test accuracy.',
    ),
    *(
      (not any(f in grids[n] for n in names), f'at names {f!r}, which none of its methods sweeps.')
      for f in c.at
    ),
    (c.condition and len(c.condition) != 2, 'a condition is (reference, harsh).'),
    (margined and not (c.margin and c.margin > 0), f'an {c.kind} claim needs a margin > 0.'),
    (
      c.upper is not None
      and (c.kind != 'better' or c.baseline or c.upper <= (c.factor if ratio else 0)),
      'upper bounds a "better" effect (above the factor of a ratio).',
    ),
    (c.consistency and not c.baseline, 'consistency compares the changes of a baseline claim.'),
    (
      c.factor != 1.0 and (c.kind != 'better' or higher),
      'factor is for "better" on a lower-is-better metric.',
    ),
    (
      c.relative and (not margined or higher),
      'a relative margin is for an equivalence or non-inferiority on a to-target metric.',
    ),
    (
      c.equal_time and c.metric != 'best_test_accuracy',
      'equal_time reads best_test_accuracy within an equal simulated time.',
    ),
  )
  yield from (why for bad, why in rules if bad)


def _errors(paper: Paper, exp: Experiment):
  yield from _budget_errors(exp)
  if len(set(exp.seeds)) < 3:
    yield f'needs >= 3 selection seeds, got {exp.seeds}.'
  if len(set(exp.test_seeds)) < 10 or set(exp.test_seeds) & set(exp.seeds):
    yield f'needs >= 10 test seeds disjoint from {exp.seeds}.'
  grids = {m.label: m.grid for m in exp.methods}
  for claim in exp.claims:
    yield from (f'claim {claim.text!r}: {why}' for why in _claim_errors(claim, grids))
  if exp.beside and exp.beside not in {e.key for e in paper.experiments}:
    yield f'beside names unknown experiment {exp.beside!r}.'
  if set(exp.edges_kept) - set(grids):
    yield f'edges_kept names unknown methods {sorted(set(exp.edges_kept) - set(grids))}.'
  if exp.target is not None and not 0 < exp.target <= 1:
    yield f'target {exp.target} is not an accuracy.'


def check(paper: Paper) -> None:
  """The protocol's rules (ValueError naming the experiment and claim)."""
  for exp in paper.experiments:
    for why in _errors(paper, exp):
      raise ValueError(f'{paper.key}/{exp.key}: {why}')
