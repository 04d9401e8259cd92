"""The vocabulary of a reproduction declaration (``configs/repro/<paper>.py``).

A declaration says, per figure/table of a paper: the shared (scaled) setting, the
methods (a config of ``configs/`` + fixed fields), the grid each method is tuned on
(the same number of settings for every method), the selection seeds, the held-out
test seeds, and the claims the experiment tests, each quoted from the paper with its
metric and the paper's own effect size. :mod:`afl_jax.reproduction.runs` runs the
grids as sweeps and stores per-run records; :mod:`afl_jax.reproduction.scoring`
selects on validation over the selection seeds and scores every claim on the test
seeds; nothing about a paper is programmed anywhere else.

Declarations and the configs they start from live in the repository (``configs/``),
not in the installed package: this module finds them beside ``afl_jax/``.

Field names are dotted config paths (``'hparams.server_lr'``, ``'schedule.concurrency'``).
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
  """One method of a comparison.

  Attributes:
    label: its name on the page (also the name claims refer to).
    config: the config it starts from, ``'FILE:NAME'`` for ``configs/FILE.py:NAME``
      (``'fmnist:fedgm'``).
    grid: dotted field -> values tried (the tuned axes; every method of an
      experiment gets the same number of settings).
    fixed: dotted field -> value set on top of the config (e.g. ``nu = 0``).
    untuned: dotted field -> why this method has no such axis although the other methods
      of its experiment sweep it (a rate its paper sets by design, e.g. AdaMasFL's server
      rate from Thm 4.1): its budget is the others' without that axis (fewer settings,
      stated on the page), and every axis it does sweep has the others' number of values.
  """

  label: str
  config: str
  grid: Mapping[str, Sequence[Any]]
  fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  untuned: Mapping[str, str] = dataclasses.field(default_factory=dict)

  @property
  def budget(self) -> int:
    return math.prod(len(v) for v in self.grid.values())

  def variant(self, fixed: Mapping[str, Any] = {}, **changes) -> 'Method':
    """This method with the dotted ``fixed`` fields added to its own, and ``changes`` (a
    new label or grid)."""
    return dataclasses.replace(self, fixed={**self.fixed, **fixed}, **changes)


# Claim metrics: name -> (what the page calls it, higher is better). 'best_test_accuracy'
# is the best evaluation of a test run (where a paper's table reports the best accuracy
# reached, e.g. FedFa's Table 4). The *_to_target
# metrics are read from the selected setting's curve at the first evaluation whose test
# accuracy reaches the experiment's target (Experiment.target). 'diverged' and
# 'not_reached' are events on a seed, for claims of kind 'on_seeds'.
METRICS = {
  'test_accuracy': ('final test accuracy', True),
  'best_test_accuracy': ('best test accuracy', True),
  'steps_to_target': ('server steps to target', False),
  'clock_to_target': ('simulated seconds to target', False),
  'mb_to_target': ('MB uploaded to target', False),
  'diverged': ('diverged (non-finite loss)', True),
  'not_reached': ('never reached the target', True),
}
KINDS = ('better', 'equivalent', 'noninferior', 'on_seeds')
# The unit of a metric's values (and of a difference of them) on the pages.
UNITS = {
  'test_accuracy': 'accuracy',
  'best_test_accuracy': 'accuracy',
  'steps_to_target': 'steps',
  'clock_to_target': 's',
  'mb_to_target': 'MB',
  'diverged': 'seeds',
  'not_reached': 'seeds',
}
ACCURACY_METRICS = ('test_accuracy', 'best_test_accuracy')


@dataclasses.dataclass(frozen=True)
class Claim:
  """A statement of the paper, scored paired over the held-out test seeds.

  Attributes:
    ref: where the paper makes it (section, figure/table number).
    text: the claim as tested here (short; names the methods).
    better, worse: method labels A and B. ``kind='better'``: A beats B on ``metric``
      (higher accuracy; fewer steps / seconds / MB to target). ``kind='equivalent'``:
      A matches B within ``margin`` (both sides). ``kind='noninferior'``: A loses at
      most ``margin`` against B ("does not compromise accuracy"). ``kind='on_seeds'``:
      the event ``metric`` ('diverged' or 'not_reached') happens to A on every test
      seed (``worse`` is the reference it is read against, shown beside it).
    quote: the paper's own statement (its words, shortened with '...').
    paper_effect: the paper's own effect in the metric's units, signed so that positive
      favours the claim (A - B for accuracy, the ratio B / A for a to-target metric, the
      difference of the two changes for a ``baseline`` claim); None where the paper gives
      no number.
    source: where ``paper_effect`` is read, with the paper's setting there (its table
      cells, dataset and model), shown beside it.
    at: restrict the methods to the settings with these field values before
      selecting (e.g. ``{'hparams.server_lr': 5.0}``: "at eta = 5"); a field restricts
      the methods whose grid sweeps it (one of the claim's methods must), so a method
      that fixes it (a multistage schedule against a constant eta) keeps its selection.
    metric: a key of :data:`METRICS` (default: final test accuracy).
    kind: 'better', 'equivalent', 'noninferior' or 'on_seeds'.
    margin: the margin of an equivalence or non-inferiority in the metric's units
      (accuracy 0.02 = 2 points).
    upper: 'better' only: the statement also bounds the effect ("only marginally
      better", "a slowdown within a small margin"): A - B below ``upper`` (a ratio B / A
      for a to-target metric); the two parts are tested and adjusted each on its own.
    factor: 'better' on a lower-is-better metric only: A needs ``factor`` times less
      than B (the paired difference is log(B / A) - log(factor); 10 = "an order of
      magnitude").
    baseline: ``(A0, B0)``: a claim across two conditions: A and B are the methods under
      one condition (e.g. Mc = 50), A0 and B0 the same methods under the other (Mc = 10),
      declared in the same experiment; scored on the per-seed changes A0 - A and B0 - B
      of the accuracy metric: "A loses less than B" (a smaller drop), or with
      ``consistency`` "A is more consistent than B" (a smaller change of either sign).
    consistency: with ``baseline``: score the size of each change, |A0 - A| against
      |B0 - B|, not the signed drop.
    condition: ``(R, H)``: the claim is about an effect of the setting (e.g. a large
      delay hurting FedBuff): R (reference condition) must beat H (harsh condition) in
      the accuracy metric on the test seeds (with ``consistency``: differ from it, either
      sign), else the verdict is "condition not reproduced".
    outside: why the claim is scored outside the tally of paper statements ('' = in
      it): a contrast of this project's, or another reading of a statement the tally
      scores once (each paper statement counts once).
    restated: how and why the claim was restated against the paper's passage (the
      earlier reading it replaces); the pages list every restated claim with its quote.
  """

  ref: str
  text: str
  better: str
  worse: str
  quote: str = ''
  paper_effect: float | None = None
  source: str = ''
  at: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  metric: str = 'test_accuracy'
  kind: str = 'better'
  margin: float | None = None
  upper: float | None = None
  factor: float = 1.0
  baseline: tuple[str, str] = ()
  consistency: bool = False
  condition: tuple[str, str] = ()
  outside: str = ''
  restated: str = ''


@dataclasses.dataclass(frozen=True)
class Experiment:
  """One figure/table: methods on one shared setting, tuned and scored the same way.

  Attributes:
    key: short name (workdir and plot names).
    title: heading on the page; ``ref`` the paper's figure/table it reproduces.
    setting: what the shared setting is, in prose (the page prints it).
    base: applied to every method's config after its own fields (the scaled setting).
    methods: the methods compared.
    claims: the claims tested.
    seeds: the selection seeds (at least 3); the seed varies the data split, schedule
      and init. Every grid setting runs on them; selection reads validation only.
    test_seeds: fresh seeds (at least 10, disjoint from ``seeds``) on which only the
      selected settings run; every claim is scored on them.
    deviations: how this experiment departs from the paper (printed on the page).
    run: False = declared but not run yet (the page says so).
    target: the test accuracy of the time/upload-to-target table and claims; None =
      the report's default (:func:`report.default_target`, stated on the page).
    second_look: non-empty when the test seeds were drawn again after an inconclusive
      result on earlier ones: what was looked at (the page reports it as a second look).
    extended: non-empty when a grid was extended (or changed) after a look at the test
      seeds and the tests ran again on the same seeds: which grid, after which verdict,
      and the test seeds looked at (each page lists them).
    edges_kept: method label -> why its selection on an edge of its grid was kept
      without extending the grid before the test runs (the edge rule,
      :func:`afl_jax.reproduction.scoring.settings_to_test`, refuses any other).
  """

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
  edges_kept: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Paper:
  """A paper's reproduction: its experiments.

  Attributes:
    key: ``docs/results/<key>.md``, ``scripts/reproduce.py --paper=<key>``.
    number: the paper's number (000-004, as in docs/algorithms.md); ``citation``
      authors, title.
    setting: the paper's own setting in one paragraph.
    experiments: the declared figures/tables.
  """

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


def _get(c: ml_collections.ConfigDict, field: str) -> Any:
  return config_path.get_value(field, c)


def with_fields(
  base: Callable[[ml_collections.ConfigDict], None],
  fields: Mapping[str, Any] = {},
  keep: Sequence[str] = (),
):
  """``base`` followed by the dotted ``fields`` (a variant of a shared setting: the IID
  partition, another concurrency, a staleness window), leaving the fields of ``keep`` as
  the method set them (``base`` runs after a method's fixed fields; ``keep`` lets methods
  of one experiment differ in a field the shared setting also sets, e.g. the concurrency
  or the delay model)."""

  def apply(c: ml_collections.ConfigDict) -> None:
    saved = {field: _get(c, field) for field in keep}
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
  """Equal budgets; a method with ``untuned`` axes has the others' number of values on
  every axis it sweeps and lacks only the declared ones (else ValueError)."""
  tuned = [m for m in exp.methods if not m.untuned]
  budgets = {m.label: m.budget for m in tuned}
  if len(set(budgets.values())) > 1:
    raise ValueError(f'{where}: unequal grid budgets {budgets}.')
  for m in exp.methods:
    if not m.untuned:
      continue
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


def check(paper: Paper) -> None:
  """Equal budgets (:func:`_check_budgets`), >= 3 selection and >= 10 fresh test seeds,
  well-formed claims naming declared methods (else ValueError naming the experiment and
  claim)."""
  for exp in paper.experiments:
    labels = [m.label for m in exp.methods]
    where = f'{paper.key}/{exp.key}'
    _check_budgets(exp, where)
    if len(set(exp.seeds)) < 3:
      raise ValueError(f'{where}: needs >= 3 selection seeds, got {exp.seeds}.')
    if len(set(exp.test_seeds)) < 10 or set(exp.test_seeds) & set(exp.seeds):
      raise ValueError(f'{where}: needs >= 10 test seeds disjoint from {exp.seeds}.')
    for claim in exp.claims:
      at = f'{where}: claim {claim.text!r}'
      for name in (claim.better, claim.worse, *claim.baseline, *claim.condition):
        if name not in labels:
          raise ValueError(f'{at} names unknown method {name!r}.')
      if claim.metric not in METRICS:
        raise ValueError(f'{at}: metric {claim.metric!r} not in {sorted(METRICS)}.')
      if claim.kind not in KINDS:
        raise ValueError(f'{at}: kind {claim.kind!r} not in {KINDS}.')
      if (claim.kind == 'on_seeds') != (claim.metric in ('diverged', 'not_reached')):
        raise ValueError(f"{at}: kind 'on_seeds' goes with metric 'diverged' or 'not_reached'.")
      ratio = claim.kind == 'better' and not METRICS[claim.metric][1] and not claim.baseline
      if claim.baseline and (
        len(claim.baseline) != 2 or claim.metric not in ACCURACY_METRICS or claim.kind != 'better'
      ):
        raise ValueError(f'{at}: a baseline is (A0, B0), for "better" on test accuracy.')
      grids = {m.label: m.grid for m in exp.methods}
      names = (claim.better, claim.worse, *claim.baseline, *claim.condition)
      for field in claim.at:
        if not any(field in grids[name] for name in names):
          raise ValueError(f'{at}: at names {field!r}, which none of its methods sweeps.')
      if claim.condition and len(claim.condition) != 2:
        raise ValueError(f'{at}: a condition is (reference, harsh).')
      if claim.kind in ('equivalent', 'noninferior') and not (claim.margin and claim.margin > 0):
        raise ValueError(f'{at}: an {claim.kind} claim needs a margin > 0.')
      if claim.upper is not None and (
        claim.kind != 'better' or claim.baseline or claim.upper <= (claim.factor if ratio else 0)
      ):
        raise ValueError(f'{at}: upper bounds a "better" effect (above the factor of a ratio).')
      if claim.consistency and not claim.baseline:
        raise ValueError(f'{at}: consistency compares the changes of a baseline claim.')
      if claim.factor != 1.0 and (claim.kind != 'better' or METRICS[claim.metric][1]):
        raise ValueError(f'{at}: factor is for "better" on a lower-is-better metric.')
    unknown = sorted(set(exp.edges_kept) - set(labels))
    if unknown:
      raise ValueError(f'{where}: edges_kept names unknown methods {unknown}.')
    if exp.target is not None and not 0 < exp.target <= 1:
      raise ValueError(f'{where}: target {exp.target} is not an accuracy.')
