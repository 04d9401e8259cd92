"""Claims as their papers state them: the best-accuracy metric, speedups as ratios, the
"not comparable" verdict, Holm beside BH, list-valued grid edges, the page's units, and
the MasFL Fig. 2 declaration's fixed rates (each against a hand computation here)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from afl_jax import reproduction
from afl_jax.reproduction import pages, runs, scoring, spec

SEL, TEST = (0, 1, 2), tuple(range(3, 13))
RNG = np.random.default_rng(1)
A_TEST = 0.80 + 0.01 * RNG.standard_normal(10)
B_TEST = 0.78 + 0.01 * RNG.standard_normal(10)


def _toy(claims):
  grid = {'hparams.client_lr': (0.1,)}
  methods = (spec.Method('A', 'fmnist:fedbuff', grid), spec.Method('B', 'fmnist:fedbuff', grid))
  return spec.Experiment('toy', 'toy', 'Fig. 0', 'toy', lambda c: None, methods, tuple(claims))


def _curves(label, phase, seeds, accs, clocks):
  """One row per (seed, evaluation): test accuracy ``accs[i]`` and wall clock
  ``clocks[i]`` at steps 0, 10, 20, ...; MB uploaded = step."""
  rows = []
  for seed, acc, clock in zip(seeds, accs, clocks):
    for j, (a, w) in enumerate(zip(acc, clock)):
      rows.append(
        {
          'experiment': 'toy',
          'method': label,
          'phase': phase,
          'setting': runs.setting_key({'hparams.client_lr': 0.1}),
          'seed': seed,
          'step': 10 * j,
          'wall_clock': w,
          'bytes_up': 1e6 * 10 * j,
          'val_accuracy': a,
          'val_loss': 1.0,
          'test_accuracy': a,
          'test_loss': 1.0,
        }
      )
  return rows


def _frame(a_curves, b_curves, a_clocks=None, b_clocks=None):
  n = len(a_curves[0])
  clocks = [[10.0 * j for j in range(n)]] * 10
  rows = _curves('A', 'select', SEL, a_curves[:3], clocks)
  rows += _curves('B', 'select', SEL, b_curves[:3], clocks)
  rows += _curves('A', 'test', TEST, a_curves, a_clocks or clocks)
  rows += _curves('B', 'test', TEST, b_curves, b_clocks or clocks)
  frame = pd.DataFrame(rows)
  return frame, scoring.finals(frame)


def _score(claim, frame, fin, target=0.5):
  return scoring.score_claim(_toy([claim]), claim, frame, fin, target)


def test_best_accuracy_is_the_best_evaluation_not_the_last():
  # A peaks mid-run then falls; B rises to its end: final and best disagree by hand.
  a = [[0.1, a + 0.05, a - 0.05] for a in A_TEST]
  b = [[0.1, b - 0.1, b] for b in B_TEST]
  frame, fin = _frame(a, b)
  final = _score(spec.Claim('r', 'A beats B', 'A', 'B'), frame, fin)
  assert final['mean'] == pytest.approx(np.mean((A_TEST - 0.05) - B_TEST))
  best = _score(spec.Claim('r', 'A beats B', 'A', 'B', metric='best_test_accuracy'), frame, fin)
  d = (A_TEST + 0.05) - B_TEST
  assert best['mean'] == pytest.approx(d.mean())
  assert best['p'] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
  eq = spec.Claim(
    'r', 'A ~ B', 'A', 'B', metric='best_test_accuracy', kind='equivalent', margin=0.1
  )
  assert _score(eq, frame, fin)['verdict_raw'] == scoring.EQUIVALENT  # |d| ~ 0.07 < 0.1


def test_a_speedup_is_the_log_ratio_shown_as_a_ratio():
  # Every curve reaches the target 0.5 at its second evaluation: A's wall clock there is
  # a_t, B's b_t; the claim "A needs 2x less time than B" is log(b/a) - log 2 > 0.
  a_t = 10.0 + RNG.uniform(0, 2, 10)
  b_t = 30.0 + RNG.uniform(0, 6, 10)
  accs = [[0.1, 0.6, 0.7]] * 10
  frame, fin = _frame(accs, accs, [[0.0, t, 2 * t] for t in a_t], [[0.0, t, 2 * t] for t in b_t])
  claim = spec.Claim('r', 'A 2x faster', 'A', 'B', metric='clock_to_target', factor=2.0)
  c = _score(claim, frame, fin)
  d = np.log(b_t / a_t) - math.log(2.0)
  res = stats.ttest_1samp(d, 0.0)
  ci = res.confidence_interval(0.95)
  assert c['ratio'] and c['p'] == pytest.approx(res.pvalue)
  assert c['mean'] == pytest.approx(np.exp(np.mean(np.log(b_t / a_t))))  # geometric mean B/A
  assert (c['lo'], c['hi']) == pytest.approx((2 * math.exp(ci.low), 2 * math.exp(ci.high)))
  assert c['verdict_raw'] == scoring.AGREES  # B/A ~ 3 > 2 on every seed
  assert pages.effect_text(c) == f'B/A {c["mean"]:.2f}x [{c["lo"]:.2f}, {c["hi"]:.2f}]'
  # The paper's own ratio 5x is above every seed's ~3x: smaller than the paper's effect.
  five = spec.Claim('r', 'A faster', 'A', 'B', metric='clock_to_target', paper_effect=5.0)
  c = _score(five, frame, fin)
  assert c['verdict_raw'] == scoring.AGREES_SMALLER
  assert pages.paper_effect_text(c) == '5.00x'


def test_a_side_shows_its_value_to_the_target_over_the_seeds_that_reached_it():
  accs = [[0.1, 0.6, 0.7]] * 10
  never = [[0.1, 0.2, 0.3]] * 10
  a_t = [[0.0, 5.0 + i, 50.0] for i in range(10)]
  frame, fin = _frame(accs, never, a_t)
  claim = spec.Claim('r', 'A faster', 'A', 'B', metric='mb_to_target')
  c = _score(claim, frame, fin)
  assert pages._side(c, 'A').endswith(': 10 MB (10/10 seeds reached)')  # step 10 = 10 MB
  assert pages._side(c, 'B').endswith(': not reached (0/10 seeds)')
  clock = _score(spec.Claim('r', 'A faster', 'A', 'B', metric='clock_to_target'), frame, fin)
  assert clock['A_reached_mean'] == pytest.approx(np.mean([5.0 + i for i in range(10)]))


def test_a_paper_effect_beyond_the_accuracy_ceiling_is_not_comparable():
  a = [[0.1, 0.5, x] for x in B_TEST + 0.001 * RNG.standard_normal(10)]
  b = [[0.1, 0.5, x] for x in B_TEST]
  frame, fin = _frame(a, b)
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
  a2 = [[0.1, 0.5, x + 0.05] for x in B_TEST]
  frame2, fin2 = _frame(a2, b)
  assert _score(big, frame2, fin2)['verdict_raw'] == scoring.AGREES


def test_holm_by_hand():
  ps = [0.001, 0.041, 0.028, 0.2, 0.012, math.nan]
  claims = [{'p': p, 'verdict_raw': scoring.AGREES} for p in ps[:-1]]
  claims.append({'p': math.nan, 'verdict_raw': scoring.NO_CONDITION})
  out = scoring.adjust(claims)
  # sorted: 0.001 (x5), 0.012 (x4), 0.028 (x3), 0.041 (x2), 0.2 (x1), running maximum
  want = {0: 0.005, 4: 0.048, 2: 0.084, 1: 0.084, 3: 0.2}
  for i, p in want.items():
    assert out[i]['p_holm'] == pytest.approx(p)
    assert out[i]['verdict_holm'] == (scoring.AGREES if p < 0.05 else scoring.INCONCLUSIVE)
  assert math.isnan(out[5]['p_holm']) and out[5]['verdict_holm'] == scoring.NO_CONDITION
  assert list(scoring.holm([0.5, 0.9])) == [1.0, 1.0]  # capped at 1


def test_the_summary_counts_both_adjustments():
  claims = [
    {'verdict': scoring.AGREES, 'verdict_holm': scoring.AGREES, 'added': False},
    {'verdict': scoring.AGREES, 'verdict_holm': scoring.INCONCLUSIVE, 'added': False},
    {'verdict': scoring.INCONCLUSIVE, 'verdict_holm': scoring.INCONCLUSIVE, 'added': True},
  ]
  table = pages.tally_table({'p': {'e': {'claims': claims}}})
  assert table.values.tolist() == [['agrees', '2', '1'], ['inconclusive', '0', '1']]


def test_list_valued_grid_edges_are_flagged():
  rows = []
  for i, window in enumerate(([1, 5], [1, 10], [1, 20])):
    key = runs.setting_key({'hparams.window': window, 'hparams.server_lr': 1.0})
    for seed in SEL:
      rows.append({'setting': key, 'seed': seed, 'val_accuracy': 0.5 + 0.1 * i})
  mine = pd.DataFrame(rows)
  assert scoring._edges(
    runs.setting_key({'hparams.window': [1, 20], 'hparams.server_lr': 1.0}), mine
  ) == ['window on high edge']
  assert (
    scoring._edges(runs.setting_key({'hparams.window': [1, 10], 'hparams.server_lr': 1.0}), mine)
    == []
  )


def test_masfl_fig2_runs_the_fig1d_selection_at_every_mc():
  paper = reproduction.load_paper('masfl')
  exps = {e.key: e for e in paper.experiments}
  frame, manifest = runs.read('masfl')
  fin = scoring.finals(runs.current(exps['fig1_noniid'], frame, manifest))
  fixed = exps['fig2_fixed']
  for m in fixed.methods:
    name, mc = pages.MC_LABEL.match(m.label).groups()
    chosen = runs.setting_of(scoring.select(fin, 'fig1_noniid', name)['setting'])
    assert {k: [v] for k, v in chosen.items()} == {k: list(v) for k, v in m.grid.items()}
    assert m.fixed['schedule.concurrency'] == int(mc) and m.budget == 1
  for c in fixed.claims:  # the drop from Mc = 20, AdaMasFL against each baseline
    assert c.baseline[0].startswith('AdaMasFL') and c.baseline[0].endswith('(Mc = 20)')
    assert c.better.startswith('AdaMasFL') and not c.added


def test_forest_panels_group_by_unit():
  base = {'kind': 'better', 'lo': -1.0, 'hi': 1.0, 'ratio': False, 'metric': 'test_accuracy'}
  claims = [
    base,
    base | {'ratio': True, 'metric': 'clock_to_target'},
    base | {'metric': 'mb_to_target'},
    base | {'kind': 'on_seeds', 'metric': 'diverged'},
  ]
  panels = pages.forest_panels(claims)
  assert list(panels) == [
    'accuracy difference (points)',
    'speedup B / A (log axis)',
    'difference (MB)',
  ]


def test_a_missed_target_says_how_many_seeds_reached_it():
  c = {
    'A': 'X',
    'B': 'Y',
    'A_reached': 0,
    'B_reached': 10,
    'n': 10,
    'verdict': scoring.MISSED,
    'verdict_raw': scoring.MISSED,
  }
  assert pages._reached_note(c) == ' (X reached it on 0/10, Y on 10/10)'
  assert pages._reached_note(c | {'verdict': 'agrees', 'verdict_raw': 'agrees'}) == ''


def test_effects_carry_their_unit():
  c = {'kind': 'better', 'metric': 'test_accuracy', 'mean': 0.0123, 'lo': -0.004, 'hi': 0.0286}
  assert pages.effect_text(c) == '+1.2 pts [-0.4, +2.9]'
  mb = c | {'metric': 'mb_to_target', 'kind': 'equivalent', 'mean': 41.0, 'lo': 12.0, 'hi': 71.0}
  assert pages.effect_text(mb) == '+41 MB [+12, +71]'
  assert pages.effect_text({'kind': 'on_seeds', 'mean': 0.3, 'n': 10}) == '3/10 seeds'
  table = pages._compact(pd.DataFrame({'a': ['x|y'], 'b': ['1']}))
  assert table.splitlines() == ['| a | b |', '| --- | --- |', '| x/y | 1 |']


def test_masfl_fig2_at_mc20_replays_fig1s_test_runs_bit_for_bit():
  # Same config, same test seeds: the Mc = 20 leg of Fig. 2 is Fig. 1's test runs again.
  paper = reproduction.load_paper('masfl')
  exps = {e.key: e for e in paper.experiments}
  frame, manifest = runs.read('masfl')
  cols = ['seed', 'step', 'test_accuracy', 'val_accuracy', 'wall_clock', 'bytes_up']
  for m in exps['fig2_fixed'].methods:
    name, mc = pages.MC_LABEL.match(m.label).groups()
    if mc != '20':
      continue
    setting = runs.setting_key({k: v[0] for k, v in m.grid.items()})
    fixed = runs.current(exps['fig2_fixed'], frame, manifest)
    fig1 = runs.current(exps['fig1_noniid'], frame, manifest)
    a = scoring.rows(fixed, 'fig2_fixed', m.label, 'test', setting).sort_values(['seed', 'step'])
    b = scoring.rows(fig1, 'fig1_noniid', name, 'test', setting).sort_values(['seed', 'step'])
    assert len(a) == len(b) > 0
    np.testing.assert_array_equal(a[cols].to_numpy(), b[cols].to_numpy())
