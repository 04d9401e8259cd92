"""The vocabulary of a reproduction declaration (``configs/repro/<paper>.py``): a
:class:`Paper`'s experiments (one figure or table each), their methods tuned on equal grids
over the selection seeds, held-out test seeds and the paper's claims. Fields are dotted
config paths (``'hparams.server_lr'``); each is explained in docs/extending.md (section g).
"""

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


@dataclasses.dataclass(frozen=True)
class Method:
  """One method of a comparison: ``config`` (``'FILE:NAME'``, ``configs/FILE.py:NAME``) with
  the dotted ``fixed`` fields set on top, tuned on ``grid`` (dotted field -> values; every
  method of an experiment gets the same number of settings). ``untuned``: dotted field -> why
  this method has no such axis although the others sweep it (a rate its paper sets by
  design): it has the others' number of values on every axis it does sweep."""

  label: str
  config: str
  grid: Mapping[str, Sequence[Any]]
  fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  untuned: Mapping[str, str] = dataclasses.field(default_factory=dict)

  @property
  def budget(self) -> int:
    return math.prod(len(v) for v in self.grid.values())

  def variant(self, fixed: Mapping[str, Any] = {}, **changes) -> 'Method':
    """This method with ``fixed`` added to its own fields, and ``changes`` (label, grid)."""
    return dataclasses.replace(self, fixed={**self.fixed, **fixed}, **changes)


# Claim metrics: name -> (what the page calls it, higher is better, unit). The *_to_target
# metrics are read at the first evaluation whose test accuracy reaches the experiment's
# target; 'diverged' and 'not_reached' are events on a seed (kind 'on_seeds').
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
  """A statement of the paper (``quote``, at ``ref``) that method A (``better``) beats B
  (``worse``) on ``metric``, scored paired over the test seeds as ``kind`` says; each
  optional field is commented below, and how each kind is tested is the protocol
  (docs/results/README.md#protocol)."""

  ref: str
  text: str  # the claim as tested here (short; names the methods)
  better: str
  worse: str
  quote: str = ''  # the paper's own words, shortened with '...'
  # Positive favours the claim: A - B (accuracy), the ratio B / A (to a target), the
  # difference of the two drops (a baseline claim); None: the paper gives no number.
  paper_effect: float | None = None
  source: str = ''  # where paper_effect is read (table cells, dataset, model)
  # Why the paper's effect is not comparable with this project's measure ('' = it is):
  # then only the statement is scored, and the page gives the reason.
  incomparable: str = ''
  # Select within these field values; restricts only the methods whose grid sweeps a field.
  at: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  metric: str = 'test_accuracy'  # a key of METRICS
  kind: str = 'better'  # or 'equivalent' / 'noninferior' (within margin), 'on_seeds' (an event)
  margin: float | None = None  # in the metric's units (accuracy 0.02 = 2 points)
  # The margin of a to-target metric as a share of B's value: within a factor 1 + margin
  # (scored on log(B / A), as a speedup).
  relative: bool = False
  upper: float | None = None  # 'better' only: also A - B below it (B / A for a ratio)
  factor: float = 1.0  # 'better' on a lower-is-better metric: A needs factor x less than B
  # (A0, B0): the same methods under another condition; scores the per-seed drops A0 - A
  # against B0 - B (their sizes with consistency).
  baseline: tuple[str, str] = ()
  consistency: bool = False
  # best_test_accuracy within an equal simulated time: on each test seed, the time both runs
  # of a pair cover (A and B, or each method and its baseline, and the condition's pair).
  equal_time: bool = False
  # (R, H): the claim is about an effect of the setting: R must beat H in accuracy (differ
  # from it, with consistency), else the verdict is "condition not reproduced".
  condition: tuple[str, str] = ()
  outside: str = ''  # why it is scored outside the tally of paper statements ('' = in it)
  restated: str = ''  # how and why it was restated against the paper's passage


@dataclasses.dataclass(frozen=True)
class Experiment:
  """One figure or table: ``methods`` on one shared setting (``base`` applied to every
  method's config after its own fields), tuned on ``seeds`` (>= 3) and scored on the fresh
  ``test_seeds`` (>= 10, disjoint). ``run=False``: run only when named; ``target``: the
  accuracy of its to-target claims (None: ``scoring.target_of``); ``beside``: the experiment
  whose claims this one scores at another scale; ``second_look`` / ``extended``: test seeds
  drawn again, or a grid extended, after a look at test results; ``looked``: earlier test
  seeds seen before the declaration took its present form (its verdicts are exploratory
  while a test seed is among them); ``edges_kept``: method -> why its selection on a grid
  edge was kept."""

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
  edges_kept: Mapping[str, str] = dataclasses.field(default_factory=dict)
  beside: str = ''

  @property
  def exploratory(self) -> bool:
    """Whether a test seed was looked at before the declaration took its present form."""
    return bool(set(self.test_seeds) & set(self.looked))


@dataclasses.dataclass(frozen=True)
class Paper:
  """A paper's reproduction: ``docs/results/<key>.md``, its number (000-004, as in
  docs/algorithms.md), citation, its own setting in one paragraph, and its experiments."""

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


def with_fields(
  base: Callable[[ml_collections.ConfigDict], None],
  fields: Mapping[str, Any] = {},
  keep: Sequence[str] = (),
):
  """``base`` followed by the dotted ``fields`` (a variant of a shared setting), leaving the
  fields of ``keep`` as the method set them (methods that differ in a field ``base`` sets)."""

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
  """The sweep config of ``method`` in ``exp``: its config, fixed fields, base, grid x seeds."""
  c = load_config(method.config)
  for field, value in method.fixed.items():
    _set(c, field, value)
  exp.base(c)
  c.sweep = ml_collections.ConfigDict(nest({**method.grid, 'seed': exp.seeds}))
  return c


def _budget_errors(exp: Experiment):
  """Unequal budgets; a method with ``untuned`` axes that does not sweep the others' other
  axes, each with their number of values."""
  tuned = [m for m in exp.methods if not m.untuned]
  budgets = {m.label: m.budget for m in tuned}
  if len(set(budgets.values())) > 1:
    yield f'unequal grid budgets {budgets}.'
  for m in (m for m in exp.methods if m.untuned):
    if not tuned or any(set(m.grid) | set(m.untuned) != set(o.grid) for o in tuned):
      yield (
        f'{m.label} sweeps {sorted(m.grid)} and leaves {sorted(m.untuned)} untuned: not the '
        'axes of the other methods.'
      )
    for field, values in m.grid.items():
      counts = {len(o.grid[field]) for o in tuned} - {len(values)}
      if counts:
        others = f'the other methods {sorted(counts)}'
        yield f'{m.label} tries {len(values)} values of {field}, {others}.'


def _claim_errors(c: Claim, grids: Mapping[str, Mapping]):
  """What is wrong with claim ``c`` (methods with their ``grids``), each in a few words."""
  names = (c.better, c.worse, *c.baseline, *c.condition)
  unknown = [n for n in names if n not in grids]
  if unknown:
    yield f'names unknown method {unknown[0]!r}.'
    return
  higher = METRICS.get(c.metric, ('', True))[1]
  margined = c.kind in ('equivalent', 'noninferior')
  if c.metric not in METRICS:
    yield f'metric {c.metric!r} not in {sorted(METRICS)}.'
  if c.kind not in KINDS:
    yield f'kind {c.kind!r} not in {KINDS}.'
  if (c.kind == 'on_seeds') != (c.metric in ('diverged', 'not_reached')):
    yield "kind 'on_seeds' goes with metric 'diverged' or 'not_reached'."
  if c.baseline and (
    len(c.baseline) != 2 or c.metric not in ACCURACY_METRICS or c.kind != 'better'
  ):
    yield 'a baseline is (A0, B0), for "better" on test accuracy.'
  for f in c.at:
    if not any(f in grids[n] for n in names):
      yield f'at names {f!r}, which none of its methods sweeps.'
  if c.condition and len(c.condition) != 2:
    yield 'a condition is (reference, harsh).'
  if margined and not (c.margin and c.margin > 0):
    yield f'an {c.kind} claim needs a margin > 0.'
  ratio = c.kind == 'better' and not higher and not c.baseline
  if c.upper is not None and (
    c.kind != 'better' or c.baseline or c.upper <= (c.factor if ratio else 0)
  ):
    yield 'upper bounds a "better" effect (above the factor of a ratio).'
  if c.consistency and not c.baseline:
    yield 'consistency compares the changes of a baseline claim.'
  if c.factor != 1.0 and (c.kind != 'better' or higher):
    yield 'factor is for "better" on a lower-is-better metric.'
  if c.relative and (not margined or higher):
    yield 'a relative margin is for an equivalence or non-inferiority on a to-target metric.'
  if c.equal_time and c.metric != 'best_test_accuracy':
    yield 'equal_time reads best_test_accuracy within an equal simulated time.'


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
  """Equal budgets, >= 3 selection and >= 10 fresh test seeds, well-formed claims naming
  declared methods (else ValueError naming the experiment and claim)."""
  for exp in paper.experiments:
    for why in _errors(paper, exp):
      raise ValueError(f'{paper.key}/{exp.key}: {why}')
