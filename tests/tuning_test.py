"""The tuning protocol on constructed records with known answers."""

import math

import numpy as np
import pytest

from afl_jax.pipeline import tuning


def _records(method, val, test, seeds=(0, 1, 2)):
  """val/test: {lr: [score per seed]} -> one record per (lr, seed)."""
  out = []
  for lr, scores in val.items():
    for i, s in enumerate(seeds):
      out.append(
        {
          'method': method,
          'seed': s,
          'hparams': {'client_lr': lr},
          'val_accuracy': scores[i],
          'test_accuracy': test[lr][i],
        }
      )
  return out


VAL = {0.01: [0.5, 0.6, 0.7], 0.1: [0.8, 0.7, 0.75], 1.0: [0.9, 0.2, 0.3]}
# 1.0 has the best single run (0.9) but the worst mean: selection must average seeds.
TEST = {0.01: [0.1, 0.2, 0.3], 0.1: [0.70, 0.72, 0.74], 1.0: [0.99, 0.99, 0.99]}
# 1.0 has the best test score: selection must never look at test.


def test_selects_by_mean_validation_and_reports_test_mean_std():
  sel = tuning.select(_records('a', VAL, TEST), 'a')
  assert sel.hparams == {'client_lr': 0.1}
  assert sel.score == pytest.approx(0.75)
  assert sel.test == (0.70, 0.72, 0.74)
  assert sel.test_mean == pytest.approx(0.72)
  assert sel.test_std == pytest.approx(0.02)  # sample std of 0.70, 0.72, 0.74
  assert sel.edges == {} and sel.enough_seeds and sel.grid_size == 3


def test_flags_a_selection_on_the_grid_edge():
  val = {**VAL, 1.0: [0.95, 0.95, 0.95]}
  sel = tuning.select(_records('a', val, TEST), 'a')
  assert sel.hparams == {'client_lr': 1.0} and sel.edges == {'client_lr': 'high'}
  assert 'ON GRID EDGE' in sel.summary()
  val = {**VAL, 0.01: [0.99, 0.99, 0.99]}
  assert tuning.select(_records('a', val, TEST), 'a').edges == {'client_lr': 'low'}


def test_edges_per_axis_on_a_two_axis_grid():
  recs = []
  for lr in (0.1, 0.2, 0.3):
    for slr in (0.5, 1.0):
      for seed in (0, 1, 2):
        score = -abs(lr - 0.2) + slr  # best: lr=0.2 (interior), server_lr=1.0 (edge)
        hp = {'client_lr': lr, 'server_lr': slr}
        recs.append(
          {'method': 'm', 'seed': seed, 'hparams': hp, 'val_accuracy': score, 'test_accuracy': 0}
        )
  sel = tuning.select(recs, 'm')
  assert sel.hparams == {'client_lr': 0.2, 'server_lr': 1.0}
  assert sel.edges == {'server_lr': 'high'}


def test_time_to_target_is_minimized_and_unreached_is_inf():
  recs = _records('a', VAL, TEST)
  ttt = {0.01: [5.0, 6.0, 7.0], 0.1: [3.0, math.inf, 3.0], 1.0: [4.0, 4.0, 4.0]}
  for r in recs:
    r['time_to_target'] = ttt[r['hparams']['client_lr']][r['seed']]
  sel = tuning.select(recs, 'a', metric='time_to_target', higher_is_better=False)
  assert sel.hparams == {'client_lr': 1.0} and sel.score == 4.0


def test_refuses_selection_on_test_and_mismatched_seeds():
  recs = _records('a', VAL, TEST)
  with pytest.raises(ValueError, match='test'):
    tuning.select(recs, 'a', metric='test_accuracy')
  with pytest.raises(ValueError, match='different seeds'):
    tuning.select(recs[:-1], 'a')


def test_few_seeds_are_flagged():
  recs = [r for r in _records('a', VAL, TEST) if r['seed'] < 2]
  sel = tuning.select(recs, 'a')
  assert not sel.enough_seeds and 'FEWER THAN 3 SEEDS' in sel.summary()


def test_budgets_must_be_equal():
  a = _records('a', VAL, TEST)
  b = _records('b', {k: VAL[k] for k in (0.01, 0.1)}, TEST)
  with pytest.raises(ValueError, match='unequal grid budgets'):
    tuning.check_budgets(a + b)
  assert tuning.check_budgets(a + _records('b', VAL, TEST)) == {'a': 3, 'b': 3}


def _selection(name, test, seeds=(0, 1, 2)):
  return tuning.Selection(
    method=name,
    hparams={},
    metric='val_accuracy',
    score=0.0,
    seeds=tuple(seeds),
    test=tuple(test),
    test_mean=float(np.mean(test)),
    test_std=float(np.std(test, ddof=1)),
    edges={},
    enough_seeds=True,
    grid_size=1,
    scores={},
  )


def test_paired_comparison_known_answer():
  # Differences a - b = 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = sqrt 12 with 2 dof,
  # whose two-sided p-value is 1 - t / sqrt(2 + t^2) (closed form for 2 dof).
  a = _selection('a', [11.0, 22.0, 33.0])
  b = _selection('b', [10.0, 20.0, 30.0])
  c = tuning.compare(a, b, alpha=0.05)
  t = math.sqrt(12)
  assert c.n == 3 and c.mean_diff == pytest.approx(2.0) and c.diff_std == pytest.approx(1.0)
  assert c.t == pytest.approx(t)
  assert c.p_value == pytest.approx(1 - t / math.sqrt(2 + t * t))  # 0.0742
  assert not c.significant  # p > 0.05: the pairing does not rescue 3 seeds here
  assert c.seed_spread == pytest.approx(11.0)  # std of 11, 22, 33
  assert c.ratio == pytest.approx(2.0 / 11.0)
  assert 'do NOT differ' in c.summary()
  assert tuning.compare(a, b, alpha=0.1).significant


def test_paired_comparison_sees_a_consistent_gap_within_large_seed_noise():
  # Seeds move both methods together by a lot; a is always 0.01 better. Unpaired the
  # gap is hidden in the seed spread; paired it is certain.
  base = [0.5, 0.7, 0.9, 0.6]
  a = _selection('a', [x + 0.01 for x in base], seeds=range(4))
  b = _selection('b', base, seeds=range(4))
  c = tuning.compare(a, b)
  assert c.significant and c.p_value < 1e-6 and c.ratio < 0.1


def test_compare_needs_common_seeds():
  with pytest.raises(ValueError, match='common seeds'):
    tuning.compare(_selection('a', [1.0, 2.0], (0, 1)), _selection('b', [1.0, 2.0], (2, 3)))


def test_report_lists_selections_and_comparisons():
  recs = _records('a', VAL, TEST) + _records('b', {**VAL, 0.1: [0.9, 0.9, 0.9]}, TEST)
  text = tuning.report(recs)
  assert '| a | client_lr=0.1 |' in text and '| b | client_lr=0.1 |' in text
  assert 'a - b = +0.0000' in text
