"""Each kind of claim against a hand computation; the page's units and plots; MasFL Fig. 2
against its committed records."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from afl_jax import reproduction
from afl_jax.reproduction import figures, pages, runs, scoring, spec

SEL, TEST = (0, 1, 2), tuple(range(3, 13))
RNG = np.random.default_rng(1)
A_TEST = 0.80 + 0.01 * RNG.standard_normal(10)
B_TEST = 0.78 + 0.01 * RNG.standard_normal(10)


def _toy(claims, labels='AB', **kw):
  methods = tuple(spec.Method(x, 'fmnist:fedbuff', {'hparams.client_lr': (0.1,)}) for x in labels)
  return spec.Experiment(
    'toy', 'toy', 'Fig. 0', 'toy', lambda c: None, methods, tuple(claims), **kw
  )


def _curves(label, phase, seeds, accs, clocks):
  """One row per (seed, evaluation): test accuracy ``accs[i]`` and wall clock
  ``clocks[i]`` at steps 0, 10, 20, ...; MB uploaded = step."""
  key = {'experiment': 'toy', 'method': label, 'phase': phase}
  key['setting'] = runs.setting_key({'hparams.client_lr': 0.1})
  return [
    key
    | {'seed': seed, 'step': 10 * j, 'wall_clock': w, 'bytes_up': 1e6 * 10 * j}
    | {'val_accuracy': a, 'val_loss': 1.0, 'test_accuracy': a, 'test_loss': 1.0}
    | {'run': f'{label}-{phase}-{seed}'}  # the run's identity
    for seed, acc, clock in zip(seeds, accs, clocks)
    for j, (a, w) in enumerate(zip(acc, clock))
  ]


def _frame(a_curves, b_curves, a_clocks=None, b_clocks=None):
  n = len(a_curves[0])
  clocks = [[10.0 * j for j in range(n)]] * 10
  rows = _curves('A', 'select', SEL, a_curves[:3], clocks)
  rows += _curves('B', 'select', SEL, b_curves[:3], clocks)
  rows += _curves('A', 'test', TEST, a_curves, a_clocks or clocks)
  rows += _curves('B', 'test', TEST, b_curves, b_clocks or clocks)
  frame = pd.DataFrame(rows)
  return frame, scoring.per_run(frame, 0.5)


def _ends(a, b=B_TEST):
  """:func:`_frame` of curves 0.1, 0.5 and then A's (B's) final accuracy per seed."""
  return _frame([[0.1, 0.5, x] for x in a], [[0.1, 0.5, x] for x in b])


def _timed(a_t, b_t):
  """:func:`_frame` of equal curves 0.1, 0.6, 0.7 at A's (B's) clocks 0, t, 2t per seed."""
  accs, clock = [[0.1, 0.6, 0.7]] * 10, lambda ts: [[0.0, t, 2 * t] for t in ts]
  return _frame(accs, accs, clock(a_t), clock(b_t))


def _score(claim, frame, fin, target=0.5):
  return scoring.score_claim(_toy([claim]), claim, frame, fin, target)


def test_best_accuracy_is_the_best_evaluation_not_the_last():
  # A peaks mid-run then falls; B rises to its end: final and best disagree by hand.
  a = [[0.1, a + 0.05, a - 0.05] for a in A_TEST]
  b = [[0.1, b - 0.1, b] for b in B_TEST]
  frame, fin = _frame(a, b)
  final = _score(spec.Claim('r', 'A beats B', 'A', 'B'), frame, fin)
  assert final['mean'] == pytest.approx(np.mean((A_TEST - 0.05) - B_TEST))
  best_claim = spec.Claim('r', 'A beats B', 'A', 'B', metric='best_test_accuracy')
  best = _score(best_claim, frame, fin)
  d = (A_TEST + 0.05) - B_TEST
  assert best['mean'] == pytest.approx(d.mean())
  assert best['p'] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
  eq = dataclasses.replace(best_claim, kind='equivalent', margin=0.1)
  assert _score(eq, frame, fin)['verdict_raw'] == scoring.EQUIVALENT  # |d| ~ 0.07 < 0.1


def test_a_speedup_is_the_log_ratio_shown_as_a_ratio():
  # Every curve reaches the target 0.5 at its second evaluation: A's wall clock there is
  # a_t, B's b_t; the claim "A needs 2x less time than B" is log(b/a) - log 2 > 0.
  a_t = 10.0 + RNG.uniform(0, 2, 10)
  b_t = 30.0 + RNG.uniform(0, 6, 10)
  frame, fin = _timed(a_t, b_t)
  claim = spec.Claim('r', 'A 2x faster', 'A', 'B', metric='clock_to_target', factor=2.0)
  c = _score(claim, frame, fin)
  d = np.log(b_t / a_t) - math.log(2.0)
  res = stats.ttest_1samp(d, 0.0)
  ci = res.confidence_interval(0.95)
  assert c['ratio'] and c['p'] == pytest.approx(res.pvalue)
  assert c['mean'] == pytest.approx(np.exp(np.mean(np.log(b_t / a_t))))  # geometric mean B/A
  assert (c['lo'], c['hi']) == pytest.approx((2 * math.exp(ci.low), 2 * math.exp(ci.high)))
  assert c['A_reached_mean'] == pytest.approx(a_t.mean())  # over the seeds that reached it
  assert c['verdict_raw'] == scoring.AGREES  # B/A ~ 3 > 2 on every seed
  assert pages.effect_text(c) == f'B/A {c["mean"]:.2f}x [{c["lo"]:.2f}, {c["hi"]:.2f}]'
  # The paper's own ratio 5x is above every seed's ~3x: smaller than the paper's effect.
  five = spec.Claim('r', 'A faster', 'A', 'B', metric='clock_to_target', paper_effect=5.0)
  c = _score(five, frame, fin)
  assert c['verdict_raw'] == scoring.AGREES_SMALLER
  assert pages.paper_effect_text(c) == '5.00x'


def test_a_paper_effect_beyond_the_accuracy_ceiling_is_not_comparable():
  frame, fin = _ends(B_TEST + 0.001 * RNG.standard_normal(10))
  # B ~ 0.78: a paper effect of 0.25 asks A for ~1.03 (> 0.99): no test against it.
  big = spec.Claim('r', 'A beats B', 'A', 'B', paper_effect=0.25)
  c = _score(big, frame, fin)
  assert c['B_mean'] + 0.25 > scoring.ACCURACY_CEILING
  assert c['verdict_raw'] == scoring.NOT_COMPARABLE and c['not_comparable']
  assert scoring.NOT_COMPARABLE not in scoring.DECIDED
  # 0.15 asks ~0.93: comparable, and the interval lies far below it.
  small = spec.Claim('r', 'A beats B', 'A', 'B', paper_effect=0.15)
  assert _score(small, frame, fin)['verdict_raw'] == scoring.SMALLER
  # A direction that is decided keeps its verdict (the paper's size is just not tested).
  assert _score(big, *_ends(B_TEST + 0.05))['verdict_raw'] == scoring.AGREES


def _claim(*parts):
  """A scored claim of ``parts``: (name, raw verdict, p) each."""
  return {'parts': [{'name': n, 'verdict': v, 'p': p} for n, v, p in parts]}


def test_the_summary_counts_both_adjustments():
  claims = [
    {'verdict': scoring.AGREES, 'verdict_holm': scoring.AGREES, 'outside': ''},
    {'verdict': scoring.AGREES, 'verdict_holm': scoring.INCONCLUSIVE, 'outside': ''},
    {'verdict': scoring.INCONCLUSIVE, 'verdict_holm': scoring.INCONCLUSIVE, 'outside': 'mine'},
  ]
  table = pages.tally_table({'p': {'e': {'claims': claims}}})
  assert table.values.tolist() == [['agrees', '2', '1'], ['inconclusive', '0', '1']]


def test_list_valued_grid_edges_are_flagged():
  key = lambda w: runs.setting_key({'hparams.window': w, 'hparams.server_lr': 1.0})  # noqa: E731
  mine = pd.DataFrame(
    {'setting': key(w), 'seed': s} for w in ([1, 5], [1, 10], [1, 20]) for s in SEL
  )
  assert scoring._edges(key([1, 20]), mine) == ['window on high edge']
  assert scoring._edges(key([1, 10]), mine) == []


def test_forest_panels_group_by_family_and_include_events():
  base = {'kind': 'better', 'lo': -1.0, 'hi': 1.0, 'ratio': False, 'metric': 'test_accuracy'}
  claims = [
    base,
    base | {'ratio': True, 'metric': 'clock_to_target'},
    base | {'metric': 'mb_to_target'},
    base | {'kind': 'on_seeds', 'metric': 'diverged'},
    base | {'metric': 'best_test_accuracy'},
  ]
  panels = figures.forest_panels(claims)
  assert list(panels) == [
    'accuracy difference (points)',
    'ratio B / A (log axis)',
    'difference (MB)',
    'event: share of the test seeds it happened on (exact 95% interval)',
  ]
  assert len(panels['accuracy difference (points)']) == 2  # final and best accuracy alike


def test_a_far_row_does_not_flatten_its_panel():
  near = [(-1.0, 1.0), (0.5, 2.0), (-3.0, -1.0), (2.0, 4.0), (4.6, 13.4)]
  assert figures._limits(near, ratio=False) == pytest.approx((-1.1 * 13.4, 1.1 * 13.4))
  # Extents 1, 1, 2, 3, 4, 13.4, 72 (with the floor 1): the 80th percentile interpolates
  # 4 + 0.8 * 9.4 = 11.52, so the axis stops at 3 x 11.52 and the -69-point row is cut.
  far = near + [(-72.0, -66.0)]
  assert figures._limits(far, ratio=False) == pytest.approx((-1.1 * 34.56, 1.1 * 34.56))


def test_overlapping_curves_are_faceted():
  exp = lambda *labels: _toy((), labels)
  few = exp('A', 'B', 'C')
  assert figures.facets(few) == [['A', 'B', 'C']]
  conditions = exp(*(f'{m} ({c})' for m in ('X', 'Y', 'Z') for c in ('mild', 'large')))
  assert figures.facets(conditions) == [
    ['X (mild)', 'X (large)'],
    ['Y (mild)', 'Y (large)'],
    ['Z (mild)', 'Z (large)'],
  ]
  eight = exp(*'ABCDEFGH')  # no conditions: the reference A beside at most 4 others
  assert figures.facets(eight) == [list('ABCDE'), ['A', 'F', 'G', 'H']]


_ACC = {'kind': 'better', 'metric': 'test_accuracy', 'mean': 0.0123, 'lo': -0.004, 'hi': 0.0286}
_MB = {'metric': 'mb_to_target', 'mean': 41, 'lo': 12, 'hi': 71}
_TO = {'A': 'A', 'B': 'B', 'kind': 'better', 'metric': 'mb_to_target', 'n': 10}
_MISSED = {'A': 'X', 'B': 'Y', 'A_reached': 0, 'B_reached': 10, 'n': 10}


@pytest.mark.parametrize(
  'cell, c, want',
  [
    (pages.effect_text, _ACC, '+1.2 pts [-0.4, +2.9]'),
    (pages.effect_text, _ACC | _MB, '+41 MB [+12, +71]'),
    (pages.effect_text, {'kind': 'on_seeds', 'mean': 0.3, 'n': 10}, '3/10 seeds'),
    (
      lambda c: pages._side(c, 'A'),
      _TO | {'A_reached': 10, 'A_reached_mean': 10.0},
      'A 10 MB (10/10 seeds reached)',
    ),
    (lambda c: pages._side(c, 'B'), _TO | {'B_reached': 0}, 'B not reached (0/10 seeds)'),
    (
      pages._reached_note,
      _MISSED | {'verdict': scoring.MISSED, 'verdict_raw': scoring.MISSED},
      'X reached it on 0/10, Y on 10/10',
    ),
    (pages._reached_note, _MISSED | {'verdict': 'agrees', 'verdict_raw': 'agrees'}, ''),
    (
      pages._compact,
      pd.DataFrame({'a': ['x|y'], 'b': ['1']}),
      '| a | b |\n| --- | --- |\n| x\\|y | 1 |',
    ),
  ],
)
def test_page_cells_carry_their_unit(cell, c, want):
  assert cell(c) == want


def test_masfl_fig2_runs_the_fig1d_selection_at_every_mc_and_replays_fig1_at_mc20():
  # Each Mc runs the setting Fig. 1(d) selected; at Mc = 20 (same config, same test seeds)
  # its test runs are Fig. 1's again, bit for bit.
  paper = reproduction.load_paper('masfl')
  exps = {e.key: e for e in paper.experiments}
  frame, manifest = runs.read('masfl')
  fig1 = runs.current(exps['fig1_noniid'], frame, manifest)
  fixed = runs.current(exps['fig2_fixed'], frame, manifest)
  fin = scoring.per_run(fig1)
  cols = ['seed', 'step', 'test_accuracy', 'val_accuracy', 'wall_clock', 'bytes_up']
  for m in exps['fig2_fixed'].methods:
    name, mc = figures.MC_LABEL.match(m.label).groups()
    chosen = runs.setting_of(scoring.select(fin, 'fig1_noniid', name)['setting'])
    assert {k: [v] for k, v in chosen.items()} == {k: list(v) for k, v in m.grid.items()}
    assert m.fixed['schedule.concurrency'] == int(mc) and m.budget == 1
    if mc == '20':
      setting = runs.setting_key(chosen)
      a = scoring.rows(fixed, 'fig2_fixed', m.label, 'test', setting).sort_values(['seed', 'step'])
      b = scoring.rows(fig1, 'fig1_noniid', name, 'test', setting).sort_values(['seed', 'step'])
      assert len(a) == len(b) > 0
      np.testing.assert_array_equal(a[cols].to_numpy(), b[cols].to_numpy())
  for c in exps['fig2_fixed'].claims:  # the drop from Mc = 20, AdaMasFL against each baseline
    assert c.baseline[0].startswith('AdaMasFL') and c.baseline[0].endswith('(Mc = 20)')
    assert c.better.startswith('AdaMasFL') and not c.outside


def _one_sided(d, bound, alternative):
  """p of the one-sided t-test of mean(d) against ``bound``, by hand."""
  d = np.asarray(d, float)
  t = (d.mean() - bound) / (d.std(ddof=1) / math.sqrt(len(d)))
  return stats.t.sf(t, len(d) - 1) if alternative == 'greater' else stats.t.cdf(t, len(d) - 1)


@pytest.mark.parametrize(
  'effect, fields, part, bound, side, verdict',
  [  # A - B per seed (or B / A of the time to the target), the test read, its H0's bound
    (0.02, dict(kind='equivalent', margin=0.01), scoring.BEYOND, 0.01, 'greater', 'NOT_EQUIVALENT'),
    (-0.01, dict(kind='noninferior', margin=0.02), scoring.STATEMENT, -0.02, 'greater', 'AGREES'),
    (-0.01, dict(kind='noninferior', margin=0.005), scoring.STATEMENT, -0.005, 'less', 'DISAGREES'),
    (0.01, dict(upper=0.02), scoring.BOUND, 0.02, 'less', 'AGREES'),
    (0.01, dict(upper=0.005), scoring.BOUND, 0.005, 'greater', 'DISAGREES'),
    (3.0, dict(metric='clock_to_target', upper=1.5), scoring.BOUND, 1.5, 'greater', 'DISAGREES'),
  ],
)
def test_margins_and_bounds_are_one_sided_tests_at_2_5_percent_per_side(
  effect, fields, part, bound, side, verdict
):
  # Beyond a margin, non-inferiority and an upper bound: each the one-sided t-test against
  # its bound (a ratio's on the log scale), twice its p; a bounded claim agrees only when
  # its direction and its bound both do.
  if 'metric' in fields:
    a_t = 10.0 + RNG.uniform(0, 2, 10)
    b_t = effect * a_t * np.exp(0.05 * RNG.standard_normal(10))
    (frame, fin), d, bound = _timed(a_t, b_t), np.log(b_t / a_t), math.log(bound)
  else:
    a = B_TEST + effect + 0.003 * RNG.standard_normal(10)
    (frame, fin), d = _ends(a), a - B_TEST
  c = _score(spec.Claim('r', 't', 'A', 'B', **fields), frame, fin)
  names = [scoring.STATEMENT] + [part] * (part != scoring.STATEMENT)  # then the test read
  assert [x['name'] for x in c['parts']] == names
  if part == scoring.BOUND:  # the direction: the two-sided t-test against 0
    assert c['parts'][0]['p'] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
  (p,) = [x['p'] for x in c['parts'] if x['name'] == part]
  assert p == pytest.approx(2 * _one_sided(d, bound, side))
  assert c['verdict_raw'] == getattr(scoring, verdict) and c['edges_against'] == []


def _four(accs):
  """Curves of four methods (two conditions) ending at ``accs[label]`` per seed, their toy
  experiment."""
  rows = []
  clocks = [[0.0, 10.0, 20.0]] * 10
  for label, acc in accs.items():
    rows += _curves(label, 'select', SEL, [[0.1, 0.5, x] for x in acc[:3]], clocks)
    rows += _curves(label, 'test', TEST, [[0.1, 0.5, x] for x in acc], clocks)
  frame = pd.DataFrame(rows)
  return frame, scoring.per_run(frame), list(accs)


def test_consistency_compares_the_sizes_of_the_mean_changes_by_a_paired_bootstrap():
  # Four conditions' accuracies per seed: A barely moves, B gains 3 points (either sign counts).
  base = 0.78 + 0.01 * RNG.standard_normal(10)
  accs = {
    'A0': base + 0.002 * RNG.standard_normal(10),
    'A': base + 0.002 * RNG.standard_normal(10),
    'B0': base - 0.03 + 0.005 * RNG.standard_normal(10),
    'B': base + 0.005 * RNG.standard_normal(10),
  }
  frame, fin, labels = _four(accs)
  kw = dict(baseline=('A0', 'B0'), condition=('B0', 'B'))
  steady = spec.Claim('r', 'A steadier', 'A', 'B', consistency=True, paper_effect=0.2, **kw)
  exp = _toy((steady,), labels)
  c = scoring.score_claim(exp, steady, frame, fin, 0.5)
  da, db = accs['A0'] - accs['A'], accs['B0'] - accs['B']
  t = abs(db.mean()) - abs(da.mean())  # the sizes of the mean changes, not per seed
  assert c['mean'] == pytest.approx(t) and c['verdict_raw'] == scoring.AGREES_SMALLER
  # The paired bootstrap by hand: resampled seeds, the same generator and seed.
  idx = np.random.default_rng(scoring.BOOTSTRAP_SEED).integers(0, 10, (scoring.BOOTSTRAP, 10))
  ts = np.abs(db[idx].mean(axis=1)) - np.abs(da[idx].mean(axis=1))
  assert (c['lo'], c['hi']) == pytest.approx(tuple(np.quantile(ts, [0.025, 0.975])))
  share = lambda k: (k + 1) / (scoring.BOOTSTRAP + 1)  # noqa: E731
  assert c['p'] == pytest.approx(2 * min(share((ts <= 0).sum()), share((ts >= 0).sum())))
  size = next(p for p in c['parts'] if p['name'] == scoring.SIZE)
  assert size['p'] == pytest.approx(2 * share((ts >= 0.2).sum()))
  assert c['conditions'] == pytest.approx({k: v.mean() for k, v in accs.items()})
  # Its condition is two-sided (the accuracies differ); "loses less" declares B0 > B, which
  # fails here (B gains): condition not reproduced.
  drop = spec.Claim('r', 'A loses less', 'A', 'B', **kw)
  assert scoring.score_claim(exp, drop, frame, fin, 0.5)['verdict_raw'] == scoring.NO_CONDITION


def test_consistency_reads_the_mean_changes_not_the_seed_noise():
  # A moves +-3 points from seed to seed around no change; B drops 1 point on every seed:
  # the per-seed sizes would call A the less consistent, the sizes of the mean changes
  # call A (about 0) steadier than B (1 point).
  noise = 0.03 * np.where(np.arange(10) % 2, 1.0, -1.0)
  base = 0.78 + 0.002 * RNG.standard_normal(10)
  accs = {'A0': base, 'A': base + noise, 'B0': base, 'B': base - 0.01}
  frame, fin, labels = _four(accs)
  steady = spec.Claim('r', 'A steadier', 'A', 'B', baseline=('A0', 'B0'), consistency=True)
  exp = _toy((steady,), labels)
  c = scoring.score_claim(exp, steady, frame, fin, 0.5)
  per_seed = np.abs(accs['B0'] - accs['B']) - np.abs(accs['A0'] - accs['A'])
  assert per_seed.mean() < -0.015 and c['mean'] == pytest.approx(0.01 - abs(noise.mean()))


def test_equal_time_reads_each_pair_within_the_time_both_runs_cover():
  # A's runs end at 20 s, B's at 40 s: B at equal time is read up to 20 s (its best there,
  # 0.5), not over its whole run (0.9); A's best is its own (0.6).
  clocks = ([[0.0, 10.0, 20.0]] * 10, [[0.0, 20.0, 40.0]] * 10)
  frame, fin = _frame([[0.1, 0.5, 0.6]] * 10, [[0.1, 0.5, 0.9]] * 10, *clocks)
  whole = spec.Claim('r', 'A best', 'A', 'B', metric='best_test_accuracy')
  timed = spec.Claim('r', 'A best', 'A', 'B', metric='best_test_accuracy', equal_time=True)
  assert _score(whole, frame, fin)['mean'] == pytest.approx(0.6 - 0.9)
  assert _score(timed, frame, fin)['mean'] == pytest.approx(0.6 - 0.5)


def test_a_relative_margin_is_a_factor_on_the_log_ratio():
  # B needs 1.1x A's time to the target on every seed (+- noise): within a factor 1.25, not
  # within 1.05.
  a_t = 10.0 + RNG.uniform(0, 2, 10)
  b_t = 1.1 * a_t * np.exp(0.01 * RNG.standard_normal(10))
  frame, fin = _timed(a_t, b_t)
  kw = dict(metric='clock_to_target', kind='equivalent', relative=True)
  c = _score(spec.Claim('r', 'A ~ B', 'A', 'B', margin=0.25, **kw), frame, fin)
  d = np.log(b_t / a_t)
  p_tost = max(_one_sided(d, -math.log(1.25), 'greater'), _one_sided(d, math.log(1.25), 'less'))
  assert c['ratio'] and c['verdict_raw'] == scoring.EQUIVALENT
  assert c['p'] == pytest.approx(2 * p_tost)
  tight = _score(spec.Claim('r', 'A ~ B', 'A', 'B', margin=0.05, **kw), frame, fin)
  assert tight['verdict_raw'] == scoring.NOT_EQUIVALENT


def test_each_test_of_a_compound_verdict_is_adjusted_on_its_own():
  # Direction p = 2e-4, the paper's size p = 0.04, among 8 other claims at p = 0.5: Holm over
  # the 10 tests keeps the direction (2e-3) and drops the size (0.36), so the claim agrees.
  compound = _claim(
    (scoring.STATEMENT, scoring.AGREES, 2e-4), (scoring.SIZE, scoring.SMALLER, 0.04)
  )
  others = [_claim((scoring.STATEMENT, scoring.INCONCLUSIVE, 0.5)) for _ in range(8)]
  out = scoring.adjust([compound, *others])[0]
  assert [p['p_holm'] for p in out['parts']] == pytest.approx([10 * 2e-4, 9 * 0.04])
  assert out['verdict_holm'] == scoring.AGREES
  assert out['p_holm'] == pytest.approx(2e-3)
  # BH: ranks 1 and 2 of 10 -> 2e-3 and 0.2: the direction stays, the size does not.
  assert [p['p_adj'] for p in out['parts']] == pytest.approx([2e-3, 0.2])
  assert out['verdict'] == scoring.AGREES
  alone = scoring.adjust([compound])[0]  # no other tests: both stay
  assert alone['verdict'] == alone['verdict_holm'] == scoring.AGREES_SMALLER


def test_the_default_target_is_read_from_validation():
  frame, fin = _ends(A_TEST)
  fin.loc[fin.phase == 'select', 'test_accuracy'] = 0.99  # test accuracy must not count
  exp = _toy([spec.Claim('r', 'A faster', 'A', 'B', metric='steps_to_target')])
  val = [fin[(fin.phase == 'select') & (fin.method == m)].val_accuracy.mean() for m in 'AB']
  assert scoring.target_of(exp, fin) == math.floor(100 * 0.9 * np.median(val)) / 100


def test_a_declared_incomparable_effect_is_shown_not_tested():
  # The paper's 24x counts other units: only the direction is scored (no size test in the
  # family), and the page shows the paper's ratio as other units, with the reason.
  a_t = 10.0 + RNG.uniform(0, 2, 10)
  frame, fin = _timed(a_t, 3 * a_t)
  kw = dict(metric='clock_to_target', paper_effect=24.0)
  tested, shown = (
    _score(spec.Claim('r', 'A faster', 'A', 'B', incomparable=why, **kw), frame, fin)
    for why in ('', 'other units')
  )
  assert [p['name'] for p in tested['parts']] == [scoring.STATEMENT, scoring.SIZE]
  assert tested['verdict_raw'] == scoring.AGREES_SMALLER  # 3x against 24x
  assert [p['name'] for p in shown['parts']] == [scoring.STATEMENT]
  assert shown['verdict_raw'] == scoring.AGREES
  assert pages.paper_effect_text(shown) == '24x (other units)'
  notes = pages.claim_notes(scoring.adjust([shown]))
  assert any("the paper's effect is not comparable: other units" in n for n in notes)


def test_exploratory_verdicts_stay_out_of_the_tally_and_pages_name_each_phases_seeds():
  claim = spec.Claim('r', 'A beats B', 'A', 'B', quote='q')
  frame, fin = _ends(A_TEST)
  fresh = _toy((claim,), looked=(1, 2))
  looked = dataclasses.replace(fresh, looked=TEST[:3])  # a test seed was looked at before
  assert not fresh.exploratory and looked.exploratory
  confirm = scoring.score_claim(fresh, claim, frame, fin, 0.5)
  explore = scoring.score_claim(looked, claim, frame, fin, 0.5)
  assert pages.tallied(confirm) and not pages.tallied(explore)
  assert '*(exploratory)*' in pages.claim_rows(scoring.adjust([explore])).iloc[0]['claim']
  assert pages.seeds_text(looked).startswith('selection 0-2; test 3-12 (exploratory')
  assert pages.seeds_text(fresh) == (
    'selection 0-2; test 3-12 (confirmatory: fresh, none of them used by an earlier test of '
    'this experiment); earlier test seeds looked at: [1, 2] (records superseded).'
  )


def test_the_summary_opens_with_one_row_per_passage_where_it_ran_and_its_verdicts():
  exp = _toy([])
  paper = spec.Paper('toy', '9', 'c', 's', (exp,))

  def claim(quote, verdict, outside=''):
    return {'quote': quote, 'ref': 'Fig. 0', 'outside': outside, 'verdict': verdict}

  claims = [claim('one', scoring.AGREES), claim('one', scoring.INCONCLUSIVE), claim('two', 'x')]
  claims = [c | {'verdict_holm': scoring.INCONCLUSIVE} for c in claims]
  claims.append(claim('three', scoring.AGREES, outside='mine') | {'verdict_holm': 'x'})
  rows = pages.passage_rows({'toy': {'toy': {'claims': claims}}}, [paper])
  assert rows.passage.tolist() == ['Fig. 0: "one"', 'Fig. 0: "two"']  # the tally's passages
  assert rows.statements.tolist() == [2, 1]
  assert rows.BH.iloc[0] == '1 agrees, 1 inconclusive' and rows.Holm.iloc[0] == '2 inconclusive'
  c = spec.load_config('fmnist:fedbuff')  # the toy's config, as its file sets it
  want = f'FMNIST, MLP 784-200-200-10, {c.num_clients} clients, {c.num_rounds} server steps'
  assert rows['ran at'].iloc[0] == want
