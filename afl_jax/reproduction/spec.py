"""The vocabulary of a reproduction declaration (``configs/repro/<paper>.py``).

A :class:`Paper` declares experiments (one figure or table each): methods (a config of
``configs/`` plus fixed fields) tuned on equal grids over the selection seeds, the held-out
test seeds, and the claims quoted from the paper; :mod:`~afl_jax.reproduction.runs` and
:mod:`~afl_jax.reproduction.scoring` do the rest. Field names are dotted config paths
(``'hparams.server_lr'``). The records and each field: docs/extending.md (section g); the
protocol: docs/results/README.md#protocol.
"""

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_collections
from ml_collections.config_flags import config_path

# configs/ of the checkout the scripts run from ($AFL_JAX_CHECKOUT, afl_jax/pipeline/cache.py),
# else of the checkout that holds this package (an editable install).
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
  method's config after its own fields), tuned on ``seeds`` (>= 3; the seed varies the data
  split, schedule and init) and scored on the fresh ``test_seeds`` (>= 10, disjoint).
  ``run=False``: run only when named (e.g. a paper-length run); ``target``: the accuracy of
  its to-target claims (None: the default, :func:`~afl_jax.reproduction.scoring.target_of`);
  ``beside``: the experiment whose claims this one scores at another scale (the page
  sets their verdicts side by side); ``second_look`` / ``extended``: test seeds drawn again,
  or a grid extended, after a look at
  test results (the pages list them); ``looked``: the earlier test seeds whose results were
  seen before the declaration took its present form: its verdicts are confirmatory only on
  test seeds disjoint from them (else exploratory, kept out of the tally); ``edges_kept``:
  method -> why its selection on a grid edge was kept (the edge rule,
  :func:`~afl_jax.reproduction.scoring.settings_to_test`)."""

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
  beside: str = ''  # the key of the experiment whose claims this one scores at another scale

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


def _check_budgets(exp: Experiment, where: str) -> None:
  """Equal budgets; a method with ``untuned`` axes sweeps the others' other axes, each with
  their number of values (else ValueError)."""
  tuned = [m for m in exp.methods if not m.untuned]
  budgets = {m.label: m.budget for m in tuned}
  if len(set(budgets.values())) > 1:
    raise ValueError(f'{where}: unequal grid budgets {budgets}.')
  for m in (m for m in exp.methods if m.untuned):
    if not tuned or any(set(m.grid) | set(m.untuned) != set(o.grid) for o in tuned):
      raise ValueError(
        f'{where}: {m.label} sweeps {sorted(m.grid)} and leaves '
        f'{sorted(m.untuned)} untuned: not the axes of the other methods.'
      )
    for field, values in m.grid.items():
      counts = {len(o.grid[field]) for o in tuned} | {len(values)}
      if len(counts) > 1:
        raise ValueError(
          f'{where}: {m.label} tries {len(values)} values of {field}, the '
          f'other methods {sorted(counts - {len(values)})}.'
        )


def _check_claim(claim: Claim, grids: Mapping[str, Mapping], at: str) -> None:
  names = (claim.better, claim.worse, *claim.baseline, *claim.condition)
  for name in names:
    if name not in grids:
      raise ValueError(f'{at} names unknown method {name!r}.')
  higher = METRICS.get(claim.metric, ('', True))[1]
  ratio = claim.kind == 'better' and not higher and not claim.baseline
  rules = (
    (claim.metric not in METRICS, f'metric {claim.metric!r} not in {sorted(METRICS)}.'),
    (claim.kind not in KINDS, f'kind {claim.kind!r} not in {KINDS}.'),
    (
      (claim.kind == 'on_seeds') != (claim.metric in ('diverged', 'not_reached')),
      "kind 'on_seeds' goes with metric 'diverged' or 'not_reached'.",
    ),
    (
      claim.baseline
      and (
        len(claim.baseline) != 2 or claim.metric not in ACCURACY_METRICS or claim.kind != 'better'
      ),
      'a baseline is (A0, B0), for "better" on test accuracy.',
    ),
    *(
      (not any(f in grids[n] for n in names), f'at names {f!r}, which none of its methods sweeps.')
      for f in claim.at
    ),
    (claim.condition and len(claim.condition) != 2, 'a condition is (reference, harsh).'),
    (
      claim.kind in ('equivalent', 'noninferior') and not (claim.margin and claim.margin > 0),
      f'an {claim.kind} claim needs a margin > 0.',
    ),
    (
      claim.upper is not None
      and (
        claim.kind != 'better' or claim.baseline or claim.upper <= (claim.factor if ratio else 0)
      ),
      'upper bounds a "better" effect (above the factor of a ratio).',
    ),
    (
      claim.consistency and not claim.baseline,
      'consistency compares the changes of a baseline claim.',
    ),
    (
      claim.factor != 1.0 and (claim.kind != 'better' or higher),
      'factor is for "better" on a lower-is-better metric.',
    ),
    (
      claim.relative and (claim.kind not in ('equivalent', 'noninferior') or higher),
      'a relative margin is for an equivalence or non-inferiority on a to-target metric.',
    ),
    (
      claim.equal_time and claim.metric != 'best_test_accuracy',
      'equal_time reads best_test_accuracy within an equal simulated time.',
    ),
  )
  for broken, why in rules:
    if broken:
      raise ValueError(f'{at}: {why}')


def check(paper: Paper) -> None:
  """Equal budgets, >= 3 selection and >= 10 fresh test seeds, well-formed claims naming
  declared methods (else ValueError naming the experiment and claim)."""
  for exp in paper.experiments:
    where = f'{paper.key}/{exp.key}'
    _check_budgets(exp, where)
    if len(set(exp.seeds)) < 3:
      raise ValueError(f'{where}: needs >= 3 selection seeds, got {exp.seeds}.')
    if len(set(exp.test_seeds)) < 10 or set(exp.test_seeds) & set(exp.seeds):
      raise ValueError(f'{where}: needs >= 10 test seeds disjoint from {exp.seeds}.')
    grids = {m.label: m.grid for m in exp.methods}
    for claim in exp.claims:
      _check_claim(claim, grids, f'{where}: claim {claim.text!r}')
    if exp.beside and exp.beside not in {e.key for e in paper.experiments}:
      raise ValueError(f'{where}: beside names unknown experiment {exp.beside!r}.')
    unknown = sorted(set(exp.edges_kept) - set(grids))
    if unknown:
      raise ValueError(f'{where}: edges_kept names unknown methods {unknown}.')
    if exp.target is not None and not 0 < exp.target <= 1:
      raise ValueError(f'{where}: target {exp.target} is not an accuracy.')
