"""Reproductions: declarations, selection, claim statistics against closed forms computed
here, statuses by identity, and the committed pages rebuilt from the committed records."""

import dataclasses
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from afl_jax import reproduction
from afl_jax.errors import UserError
from afl_jax.pipeline import cache, sweep
from afl_jax.pipeline import config as config_lib
from afl_jax.reproduction import pages, records, runs, scoring, spec

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize('key', reproduction.PAPERS)
def test_declaration_validates(key):
  paper = reproduction.load_paper(key)
  assert paper.key == key
  for exp in paper.experiments:
    for method in exp.methods:
      c = spec.sweep_config(exp, method)
      config_lib.validate(config_lib.resolve(c))
      sweep.validate_sweep(c)
      assert len(sweep.grid(c)) == method.budget * len(exp.seeds)
      for _, t in runs.sweep_configs(exp, method, 'test', [runs.setting_key({'hparams.x': 1})]):
        assert sweep.sweep_axes(t.sweep)['seed'] == list(exp.test_seeds)


_GRID = {'hparams.client_lr': (0.1, 0.3)}
_TWO = {'hparams.client_lr': (0.1, 0.3), 'hparams.server_lr': (1.0, 3.0)}
_WHY = {'hparams.server_lr': 'set by the paper'}


def _with_b(b, **kw):
  """A toy experiment whose B is ``b`` (A sweeps two axes), for the untuned-axis rules."""
  return dataclasses.replace(_toy([_c()], **kw), methods=(spec.Method('A', 'x', _TWO), b))


@pytest.mark.parametrize(
  'exp, match',
  [
    (lambda: _toy([_c()], test_seeds=(0, 1, 2)), 'disjoint'),
    (lambda: _toy([_c()], test_seeds=(3, 4, 5)), '>= 10 test seeds'),
    (lambda: _toy([spec.Claim('r', 't', 'A', 'C')]), "unknown method 'C'"),
    (lambda: _toy([_c(kind='equivalent')]), 'needs a margin'),
    (lambda: _toy([_c(kind='on_seeds')]), "'on_seeds' goes with"),
    (lambda: _toy([_c(condition=('A', 'Z'))]), "unknown method 'Z'"),
    (lambda: _toy([_c()], edges_kept={'C': 'x'}), 'edges_kept names'),
    (
      lambda: _toy([_c(at={'hparams.beta': 0.9})]),
      "at names 'hparams.beta', which none of its methods sweeps",
    ),
    # fewer settings without saying why (budget 2 against 4)
    (lambda: _with_b(spec.Method('B', 'x', _GRID)), 'unequal grid budgets'),
    # the shared axis with another number of values (4 settings, as the others)
    (
      lambda: _with_b(
        spec.Method('B', 'x', {'hparams.client_lr': (0.1, 0.2, 0.3, 0.4)}, untuned=_WHY)
      ),
      'tries 4 values of hparams.client_lr',
    ),
    # an untuned axis no other method sweeps
    (lambda: _with_b(spec.Method('B', 'x', _GRID, untuned={'hparams.beta': 'x'})), 'untuned'),
  ],
)
def test_check_refuses_bad_declarations(exp, match):
  spec.check(_paper(_toy([_c()])))
  spec.check(_paper(_with_b(spec.Method('B', 'x', _GRID, untuned=_WHY))))
  with pytest.raises(ValueError, match=f'toy/toy.*{re.escape(match)}'):
    spec.check(_paper(exp()))


def test_setting_variants_set_and_keep_dotted_fields():
  def base(c):
    c.num_rounds = 7
    c.schedule.concurrency = 3

  c = config_lib.default()
  spec.with_fields(base, {'partition': 'iid', 'schedule.window': 4})(c)
  assert (c.num_rounds, c.schedule.concurrency, c.partition, c.schedule.window) == (7, 3, 'iid', 4)
  c.schedule.concurrency = 9
  spec.with_fields(base, keep=('schedule.concurrency',))(c)
  assert (c.num_rounds, c.schedule.concurrency) == (7, 9)


def _c(**kw):
  return spec.Claim('r', 't', 'A', 'B', **kw)


def _toy(claims, **kw):
  b = spec.Method('B', 'fmnist:fedbuff', _GRID, fixed={'hparams.server_lr': 2.0})
  return spec.Experiment(
    key='toy',
    title='toy',
    ref='Fig. 0',
    setting='toy setting',
    base=lambda c: None,
    methods=(spec.Method('A', 'fmnist:fedbuff', _GRID), b),
    claims=tuple(claims),
    **kw,
  )


@pytest.fixture
def toy_identities(monkeypatch):
  """Each toy run's identity named as ``_rows`` names it, without building its data: the
  method (B's server rate is 2), the phase (by seed), the client rate and the seed."""

  def identities(config):
    out = {}
    for point in sweep.grid(config):
      c = sweep.point_config(config, point)
      label = 'B' if c.hparams.server_lr == 2.0 else 'A'
      phase = 'select' if c.seed in SEL else 'test'
      out[sweep.run_name(point)] = {'digest': f'{label}-{phase}-{c.hparams.client_lr}-{c.seed}'}
    return out

  monkeypatch.setattr(runs, 'identities', identities)
  monkeypatch.setattr(runs, '_IDENTITIES', cache.Scoped())


def _rows(label, phase, lr, seeds, val, test, steps=(0, 10, 20)):
  """Curves rising linearly to (val, test) at the last step; wall clock = 2 * step."""
  key = {'experiment': 'toy', 'method': label, 'phase': phase}
  key['setting'] = runs.setting_key({'hparams.client_lr': lr})
  return [
    key
    | {'seed': seed, 'step': step, 'wall_clock': 2.0 * step, 'bytes_up': 1e6 * step}
    | {'val_accuracy': v * (step / steps[-1]) if step else 0.1, 'val_loss': 1.0}
    | {'test_accuracy': t * (step / steps[-1]), 'test_loss': 1.0}
    | {'run': f'{label}-{phase}-{lr}-{seed}'}  # the run's identity
    for seed, v, t in zip(seeds, val, test)
    for step in steps
  ]


SEL, TEST = (0, 1, 2), tuple(range(3, 13))
RNG = np.random.default_rng(0)
A_TEST = 0.80 + 0.01 * RNG.standard_normal(10)
B_TEST = 0.78 + 0.01 * RNG.standard_normal(10)


def _frame():
  rows = []
  # A: best on validation at 0.3 although its selection-seed TEST score is higher at 0.1.
  rows += _rows('A', 'select', 0.1, SEL, [0.70] * 3, [0.90] * 3)
  rows += _rows('A', 'select', 0.3, SEL, [0.75] * 3, [0.60] * 3)
  rows += _rows('B', 'select', 0.1, SEL, [0.72] * 3, [0.70] * 3)
  rows += _rows('B', 'select', 0.3, SEL, [0.71, 0.70, float('nan')], [0.7, 0.7, 0.7])
  rows += _rows('A', 'test', 0.3, TEST, A_TEST, A_TEST)
  rows += _rows('B', 'test', 0.1, TEST, B_TEST, B_TEST)
  rows += _rows('A', 'test', 0.1, TEST, A_TEST - 0.05, A_TEST - 0.05)
  rows += _rows('B', 'test', 0.3, TEST, B_TEST, B_TEST)
  return pd.DataFrame(rows)


def test_selects_on_validation_over_selection_seeds_only():
  frame = _frame()
  fin = scoring.per_run(frame)
  a = scoring.select(fin, 'toy', 'A')
  assert runs.setting_of(a['setting']) == {'hparams.client_lr': 0.3}  # not the test-best 0.1
  assert a['val'] == pytest.approx(0.75) and a['edges'] == ['client_lr on high edge']
  b = scoring.select(fin, 'toy', 'B')  # the NaN run diverged: scores 0, mean (0.71+0.7)/3
  assert runs.setting_of(b['setting']) == {'hparams.client_lr': 0.1}
  assert fin.diverged.sum() == 1
  at = {'hparams.client_lr': 0.1}
  exp = _toy([_c(at=at)])
  settings = scoring.test_settings(exp, fin)
  assert settings['A'] == [runs.setting_key({'hparams.client_lr': 0.3}), runs.setting_key(at)]
  assert settings['B'] == [runs.setting_key(at)]


def test_a_tie_is_broken_the_same_way_whatever_the_row_order():
  # Every setting diverged on every seed (all score 0): the selection must not depend on
  # the order of the rows (it did, through an unstable sort, before).
  rows = _rows('A', 'select', 0.1, SEL, [0.5] * 3, [0.5] * 3)
  rows += _rows('A', 'select', 0.3, SEL, [0.5] * 3, [0.5] * 3)
  frame = pd.DataFrame(rows)
  picks = {
    scoring.select(scoring.per_run(frame.sample(frac=1, random_state=i)), 'toy', 'A')['setting']
    for i in range(20)
  }
  assert picks == {runs.setting_key({'hparams.client_lr': 0.1})}


def test_better_claim_is_the_paired_t_on_test_seeds():
  frame = _frame()
  fin = scoring.per_run(frame)
  claim = spec.Claim('r', 'A beats B', 'A', 'B', paper_effect=0.02)
  c = _score(claim, frame, fin)
  d = A_TEST - B_TEST  # the closed form: mean, its 95% t-interval, the two-sided p
  mean, se = d.mean(), np.std(d, ddof=1) / math.sqrt(10)
  half, p = stats.t.ppf(0.975, 9) * se, 2 * stats.t.sf(abs(mean / se), 9)
  assert (c['mean'], c['lo'], c['hi'], c['p']) == pytest.approx(
    (mean, mean - half, mean + half, p), rel=1e-9
  )
  assert c['n'] == 10 and c['verdict_raw'] == scoring.AGREES
  big = dataclasses.replace(claim, paper_effect=0.2)  # the CI lies below the paper's 20 points
  c = _score(big, frame, fin)
  assert c['verdict_raw'] == scoring.AGREES_SMALLER  # its reverse: the edge test below
  at = spec.Claim('r', 'at 0.1', 'A', 'B', at={'hparams.client_lr': 0.1})
  c = _score(at, frame, fin)
  assert c['mean'] == pytest.approx(np.mean(A_TEST - 0.05 - B_TEST))


def test_a_decided_verdict_names_the_losers_grid_edge():
  # A is selected at 0.3 (its high edge), B at 0.1 (its low edge): a verdict names the edge
  # of the method it goes against, and the page shows it only beside a decided verdict.
  frame = _frame()
  fin = scoring.per_run(frame)
  claim = spec.Claim('r', 'A beats B', 'A', 'B')
  c = _score(claim, frame, fin)
  assert c['verdict_raw'] == scoring.AGREES and c['edges_against'] == ['B: client_lr on low edge']
  rev = spec.Claim('r', 'B beats A', 'B', 'A')
  c = _score(rev, frame, fin)
  assert c['verdict_raw'] == scoring.DISAGREES
  assert c['edges_against'] == ['B: client_lr on low edge']  # B is the claim's A, and lost
  row = pages.claim_rows(scoring.adjust([c])).iloc[0]
  assert row['BH'].endswith('(against a grid edge: B: client_lr on low edge)')
  assert row['BH'].startswith(f'**{scoring.DISAGREES}** (p=')
  undecided = c | {'parts': [c['parts'][0] | {'p': 0.5}]}
  row = pages.claim_rows(scoring.adjust([undecided])).iloc[0]
  assert row['BH'] == f'**{scoring.INCONCLUSIVE}** (p=0.5)'
  wide = spec.Claim('r', 'A ~ B', 'A', 'B', kind='equivalent', margin=0.05)
  c = _score(wide, frame, fin)
  assert c['verdict_raw'] == scoring.EQUIVALENT and c['edges_against'] == []
  narrow = spec.Claim('r', 'A ~ B', 'A', 'B', kind='equivalent', margin=0.001)
  c = _score(narrow, frame, fin)  # A - B > 0.001: B is low
  assert c['verdict_raw'] == scoring.NOT_EQUIVALENT and c['mean'] > 0
  assert c['edges_against'] == ['B: client_lr on low edge']


def _score(claim, frame, fin, target=0.5):
  return scoring.score_claim(_toy([claim]), claim, frame, fin, target)


def _at(frame, claim, target):
  """``claim`` scored on ``frame`` at ``target`` (the per-seed table read at it)."""
  return _score(claim, frame, scoring.per_run(frame, target), target)


def test_to_target_reads_the_first_evaluation_and_missed_seeds_block_agreement():
  frame = _frame()
  # Curves are t * step / 20 at steps 0, 10, 20: target 0.395 is reached at step 10
  # when t >= 0.79, else at step 20 (every test score here exceeds 0.395 * 1).
  claim = spec.Claim('r', 'A faster', 'A', 'B', metric='clock_to_target')
  c = _at(frame, claim, 0.395)
  a_clock = np.where(A_TEST >= 0.79, 20.0, 40.0)
  b_clock = np.where(B_TEST >= 0.79, 20.0, 40.0)
  assert c['ratio'] and c['mean'] == pytest.approx(np.exp(np.mean(np.log(b_clock / a_clock))))
  high = _at(frame, claim, 0.81)  # A misses on some seeds
  assert high['A_reached'] == int((A_TEST >= 0.81).sum()) < 10
  assert high['verdict_raw'] in (scoring.MISSED, scoring.INCONCLUSIVE, scoring.DISAGREES)
  # An event: the exact binomial test against "on each seed with probability 1/2", two-sided.
  never = spec.Claim('r', 'B never', 'B', 'A', metric='not_reached', kind='on_seeds')
  c = _at(frame, never, 0.9)
  assert c['verdict_raw'] == scoring.AGREES and c['p'] == pytest.approx(2 * 0.5**10)
  assert _at(frame, never, 0.1)['verdict_raw'] == scoring.DISAGREES


def test_a_run_whose_records_end_before_its_last_step_is_refused(tmp_path):
  # A's test run of seed 4 lost its last evaluation: reading the records refuses it in one
  # line (scoring would have read step 10 as its final); a diverged run ending early is kept.
  exp = _toy([_c()], edges_kept={'A': 'toy', 'B': 'toy'})
  f = _frame()
  a4 = (f.method == 'A') & (f.phase == 'test') & (f.seed == 4)
  short = a4 & (f.step == 20)
  runs.write('toy', f[~short], _manifest(exp), str(tmp_path))
  with pytest.raises(records.RecordsError) as e:
    runs.read('toy', str(tmp_path))
  assert 'the run of seed 4 ends at step 10, before its last step 20' in str(e.value)
  assert '\n' not in str(e.value)
  f.loc[a4 & (f.step == 10), 'test_loss'] = float('nan')
  runs.write('toy', f[~short], _manifest(exp), str(tmp_path))
  assert len(runs.read('toy', str(tmp_path))[0]) == len(f) - short.sum()


def test_equivalence_is_tost_and_beyond_the_margin_and_the_condition_gates():
  # Every test at 2.5% per side, each fixed by the declaration: within the margin (both
  # one-sided tests of TOST) and beyond it (either side), stated as p on the two-sided scale.
  frame = _frame()
  fin = scoring.per_run(frame)
  d = A_TEST - B_TEST
  n, se = len(d), np.std(d, ddof=1) / math.sqrt(len(d))
  for margin in (0.05, 0.021, 0.001):
    claim = spec.Claim('r', 'A ~ B', 'A', 'B', kind='equivalent', margin=margin)
    c = _score(claim, frame, fin)
    up, down = (d.mean() + margin) / se, (d.mean() - margin) / se
    p_tost = max(stats.t.sf(up, n - 1), stats.t.cdf(down, n - 1))
    p_out = min(stats.t.sf(down, n - 1), stats.t.cdf(up, n - 1))
    assert [part['name'] for part in c['parts']] == [scoring.STATEMENT, scoring.BEYOND]
    want = [min(1.0, 2 * p_tost), min(1.0, 2 * p_out)]  # capped at 1
    assert [part['p'] for part in c['parts']] == pytest.approx(want, rel=1e-9)
  # (its verdicts at 0.05 and 0.001: test_a_decided_verdict_names_the_losers_grid_edge)
  # The condition "B beats A" is a one-sided test of its own (in the family): it fails here.
  cond = spec.Claim('r', 'needs B > A', 'A', 'B', condition=('B', 'A'))
  c = _score(cond, frame, fin)
  assert c['verdict_raw'] == scoring.NO_CONDITION
  assert c['parts'][-1]['name'] == scoring.CONDITION
  assert c['parts'][-1]['p'] == pytest.approx(min(1.0, 2 * stats.t.sf(-d.mean() / se, n - 1)))
  met = spec.Claim('r', 'needs A > B', 'A', 'B', condition=('A', 'B'))
  assert _score(met, frame, fin)['verdict_raw'] == scoring.AGREES


def test_benjamini_hochberg_and_holm_by_hand():
  ps = [0.001, 0.041, 0.028, 0.2, 0.012]
  claims = [{'parts': [{'name': scoring.STATEMENT, 'verdict': scoring.AGREES, 'p': p}]} for p in ps]
  out = scoring.adjust(claims)
  order = np.argsort(ps)
  m, bh, holm = len(ps), {}, {}
  running = 1.0
  for rank in range(m, 0, -1):  # BH step-up: p_(k) * m / k, made monotone from the top
    running = min(running, ps[order[rank - 1]] * m / rank)
    bh[order[rank - 1]] = running
  running = 0.0
  for rank in range(1, m + 1):  # Holm step-down: p_(k) * (m - k + 1), running maximum, <= 1
    running = max(running, ps[order[rank - 1]] * (m - rank + 1))
    holm[order[rank - 1]] = min(running, 1.0)
  for i in range(m):
    assert (out[i]['p_adj'], out[i]['p_holm']) == pytest.approx((bh[i], holm[i]))
    assert out[i]['verdict'] == (scoring.AGREES if bh[i] < 0.05 else scoring.INCONCLUSIVE)
    assert out[i]['verdict_holm'] == (scoring.AGREES if holm[i] < 0.05 else scoring.INCONCLUSIVE)


def _manifest(exp):
  """The manifest entries of ``_frame``'s sweeps (unmarked), their identities from the rows."""
  out, f = [], _frame()
  phases = [('select', '*', list(SEL))] + [('test', k, list(TEST)) for k in sorted(set(f.setting))]
  for m in exp.methods:
    for phase, setting, seeds in phases:
      entry = {'experiment': 'toy', 'method': m.label, 'phase': phase, 'setting': setting}
      rows = f[records.sweep_rows(f, entry | {'seeds': seeds})]
      ident = records.sweep_identity(rows.run)
      out.append(
        entry | {'seeds': seeds, 'identity': ident, 'runs': rows.run.nunique(), 'steps': 20}
      )
  return out


def _paper(exp):
  return spec.Paper('toy', '9', 'c', 's', (exp,))


def test_records_of_an_earlier_declaration_are_never_scored(tmp_path, toy_identities):
  # Two-value grids: every selection is on an edge, kept here (the edge rule's own test below).
  exp = _toy([_c()], edges_kept={'A': 'toy', 'B': 'toy'})
  d = str(tmp_path)
  runs.write('toy', _frame(), _manifest(exp), d)
  assert scoring.refresh(_paper(exp), d)  # the statuses, by identity
  assert set(pages.score_paper(_paper(exp), d)) == {'toy'}
  # The same records under a declaration with another grid: stale, so not scored.
  other = {'hparams.client_lr': (0.1, 0.2)}
  changed = dataclasses.replace(
    exp, methods=tuple(dataclasses.replace(m, grid=other) for m in exp.methods)
  )
  assert len(scoring.stale_status(_paper(changed), d)) == 4  # the current ones: superseded
  half = dataclasses.replace(exp, methods=(exp.methods[0], changed.methods[1]))  # B's grid
  f, manifest = runs.read('toy', d)
  # Other test seeds make every test sweep stale; a page built before the statuses follow
  # the declaration is refused in one line.
  reseeded = dataclasses.replace(exp, test_seeds=tuple(range(20, 30)))
  marked = scoring.mark(_paper(reseeded), f, manifest)
  assert {m['phase'] for m in marked if m['status'] == 'current'} == {'select'}
  with pytest.raises(UserError, match=r'declares \[20, .*report.py --write --restatus'):
    pages.score_paper(_paper(reseeded), d)
  # The test phase selects on the selection sweeps as declared now (by identity): B's
  # selection sweep of an earlier grid does not count (its rows would still select).
  selected_b = runs.setting_key({'hparams.client_lr': 0.1})
  assert scoring.settings_to_test('toy', exp, d)['B'] == [selected_b]
  with pytest.raises(UserError, match='no selection records .*for B; run --phase=select'):
    scoring.settings_to_test('toy', half, d)
  # A selected setting whose test sweep has not run yet: not scored (not a crash).
  partial = f[~((f.method == 'B') & (f.phase == 'test') & (f.setting == selected_b))]
  unrun = [m for m in manifest if (m['method'], m['setting']) != ('B', selected_b)]
  runs.write('toy', partial.drop(columns='status'), unrun, d)
  assert pages.score_paper(_paper(exp), d) == {}


def test_a_selection_on_a_grid_edge_stops_the_test_phase(tmp_path, toy_identities):
  # A is selected at 0.3 (its high edge) and B at 0.1 (its low edge): the test phase is
  # refused, naming both, until the grid is extended or the experiment keeps the edges.
  exp = _toy([_c()])
  runs.write('toy', _frame(), _manifest(exp), str(tmp_path))
  with pytest.raises(UserError) as e:
    scoring.settings_to_test('toy', exp, str(tmp_path))
  assert 'A (client_lr=0.3): client_lr on high edge' in str(e.value)
  assert 'B (client_lr=0.1): client_lr on low edge' in str(e.value)
  kept = dataclasses.replace(exp, edges_kept={'A': 'why', 'B': 'why'})
  assert scoring.settings_to_test('toy', kept, str(tmp_path)) == {
    'A': [runs.setting_key({'hparams.client_lr': 0.3})],
    'B': [runs.setting_key({'hparams.client_lr': 0.1})],
  }


def test_the_tally_scores_each_statement_once():
  # No two claims of the tally compare the same methods under the same passage of the same
  # figure or table (and restriction); every claim of the tally quotes its passage.
  seen = {}
  for key in reproduction.PAPERS:
    for exp in reproduction.load_paper(key).experiments:
      for c in exp.claims:
        if c.outside:
          continue
        statement = (c.ref, c.quote, c.better, c.worse, c.baseline, tuple(sorted(c.at.items())))
        assert statement not in seen, (key, exp.key, c.text, seen.get(statement))
        seen[statement] = (key, exp.key, c.text)
        assert c.quote, (key, exp.key, c.text)


def test_a_superseded_sweeps_rows_are_marked_and_refresh_follows_the_declaration(
  tmp_path, toy_identities
):
  exp = _toy([_c()])
  paper = _paper(exp)
  f = _frame()
  runs.write('toy', f, _manifest(exp), str(tmp_path))  # unmarked, as before the column
  assert len(scoring.stale_status(paper, str(tmp_path))) == len(_manifest(exp)) == 6
  assert scoring.refresh(paper, str(tmp_path))
  frame, manifest = runs.read('toy', str(tmp_path))

  def tested(*pairs):  # by hand: the test rows of these (method, client_lr)
    out = pd.Series(False, index=frame.index)
    for label, lr in pairs:
      key = runs.setting_key({'hparams.client_lr': lr})
      out |= (frame.method == label) & (frame.phase == 'test') & (frame.setting == key)
    return out

  def expect(current):
    assert (frame.status[current] == 'current').all()
    assert (frame.status[~current] == 'superseded').all()

  # A is selected at 0.3 and B at 0.1: the tests at the other settings are not scored.
  expect((frame.phase == 'select') | tested(('A', 0.3), ('B', 0.1)))
  assert scoring.stale_status(paper, str(tmp_path)) == []
  assert not scoring.refresh(paper, str(tmp_path))
  # A claim "at client_lr = 0.1" scores A's test at 0.1 too.
  at = dataclasses.replace(
    exp, claims=(*exp.claims, spec.Claim('r', 'at', 'A', 'B', at={'hparams.client_lr': 0.1}))
  )
  assert scoring.stale_status(_paper(at), str(tmp_path)) == [
    'toy/A/test {"hparams.client_lr": 0.1}'
  ]
  assert scoring.refresh(_paper(at), str(tmp_path))
  frame, _ = runs.read('toy', str(tmp_path))
  expect((frame.phase == 'select') | tested(('A', 0.3), ('A', 0.1), ('B', 0.1)))
  # B's grid changes: B's selection sweep is superseded, and with it every test sweep
  # (B has nothing to select from: the experiment is not scored); A's selection stays.
  other = {'hparams.client_lr': (0.1, 0.2)}
  b_other = dataclasses.replace(exp.methods[1], grid=other)
  half = _paper(dataclasses.replace(exp, methods=(exp.methods[0], b_other)))
  assert scoring.refresh(half, str(tmp_path))
  frame, manifest = runs.read('toy', str(tmp_path))
  expect((frame.phase == 'select') & (frame.method == 'A'))
  assert pages.score_paper(half, str(tmp_path)) == {}
  # Back to the first declaration: the marking follows it, and the rows marked current
  # are the ones its page scores (its tables and claims rebuilt from them alone).
  assert scoring.refresh(paper, str(tmp_path))
  frame, manifest = runs.read('toy', str(tmp_path))
  expect((frame.phase == 'select') | tested(('A', 0.3), ('B', 0.1)))
  only = tmp_path / 'only'
  only.mkdir()
  keep = [m for m in manifest if m['status'] == 'current']
  runs.write('toy', frame[frame.status == 'current'], keep, str(only))
  full, alone = (pages.score_paper(paper, str(d))['toy'] for d in (tmp_path, only))
  for part in ('selection', 'test'):
    pd.testing.assert_frame_equal(full[part], alone[part])
  assert full['claims'] == alone['claims'] and full['target'] == alone['target']
  # Rows and values are untouched by the marking.
  cols = runs.KEYS + runs.METRIC_COLUMNS
  a = f.sort_values(runs.KEYS).reset_index(drop=True)[cols]
  pd.testing.assert_frame_equal(a, frame[cols], check_dtype=False)


def test_at_restricts_only_the_methods_that_sweep_its_field():
  # B sweeps another field (as a multistage schedule against a constant eta): "A at
  # client_lr = 0.1 against B" restricts A only; B keeps its own selection.
  frame = _frame()
  b = frame.method == 'B'
  frame.loc[b, 'setting'] = frame.setting[b].str.replace('client_lr', 'server_lr')
  fin = scoring.per_run(frame)
  grid_b = {'hparams.server_lr': (0.1, 0.3)}
  exp = _toy([_c(at={'hparams.client_lr': 0.1})])
  b_other = spec.Method('B', 'fmnist:fedbuff', grid_b)
  exp = dataclasses.replace(exp, methods=(exp.methods[0], b_other))
  spec.check(_paper(exp))
  claim = exp.claims[0]
  assert scoring.select(fin, 'toy', 'A', claim.at)['setting'] == runs.setting_key(claim.at)
  b_at, b_all = scoring.select(fin, 'toy', 'B', claim.at), scoring.select(fin, 'toy', 'B')
  assert b_at['setting'] == b_all['setting'] == runs.setting_key({'hparams.server_lr': 0.1})
  assert len(b_at['scores']) == 2
  c = scoring.score_claim(exp, claim, frame, fin, 0.5)
  assert c['mean'] == pytest.approx(np.mean(A_TEST - 0.05 - B_TEST))  # B at 0.1, its selection
  with pytest.raises(ValueError, match='no selection records'):  # a value A never ran
    scoring.select(fin, 'toy', 'A', {'hparams.client_lr': 0.2})


def _first_run(exp, entry):
  """(seed, identity) of the first run (first grid point) of the recorded sweep ``entry``,
  as the declaration builds it now (its data and schedule; nothing trained)."""
  from afl_jax.pipeline import build

  method = {m.label: m for m in exp.methods}[entry['method']]
  settings = [entry['setting']] if entry['phase'] == 'test' else []
  ((_, config),) = runs.sweep_configs(exp, method, entry['phase'], settings)
  c = sweep.point_config(config, sweep.grid(config)[0])
  return c.seed, build.built_identity(c)['digest']


_FIRST_RUNS = """
import json, sys
from afl_jax.pipeline.devices import set_cpu_devices
set_cpu_devices({devices})
sys.path.insert(0, {tests!r})
from afl_jax import reproduction
from repro_test import _first_run
out = []
for key, exp_key, entry in json.load(sys.stdin):
  exp = {{e.key: e for e in reproduction.load_paper(key).experiments}}[exp_key]
  out.append(_first_run(exp, entry))
print(json.dumps(out))
"""


def _first_runs(wanted):
  """:func:`_first_run` of each ``(paper, experiment, sweep)``, built in a fresh process on
  the CPU devices the sweep was recorded on (its machine line's cores; identities hold it)."""
  by_devices = {}
  for i, (_, _, entry) in enumerate(wanted):
    m = re.fullmatch(r'\S+ \S+, (\d+) CPU cores, JAX \S+ on cpu \(cpu\)', entry['machine'])
    assert m, f'{records.label(entry)}: not recorded on one CPU process: {entry["machine"]}'
    by_devices.setdefault(int(m.group(1)), []).append(i)
  out = [None] * len(wanted)
  for devices, at in by_devices.items():
    env = {k: v for k, v in os.environ.items() if k not in ('XLA_FLAGS', 'AFL_JAX_CPU_DEVICES')}
    code = _FIRST_RUNS.format(devices=devices, tests=str(ROOT / 'tests'))
    given, kw = json.dumps([wanted[i] for i in at]), dict(capture_output=True, text=True)
    cmd = [sys.executable, '-c', code]
    proc = subprocess.run(cmd, input=given, env=env | {'PYTHONPATH': str(ROOT)}, timeout=600, **kw)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for i, (seed, ident) in zip(at, json.loads(proc.stdout.splitlines()[-1])):
      out[i] = seed, ident
  return out


# Papers whose committed records predate the run identity as it is now (fedfa's: before it
# covered JAX's settings, the device kind and own code by parsed tree; 42 of 44 sweeps were
# stale already). Their pages still score them; the check fails once they are rerun.
STALE_RECORDS = ('fedfa',)


def test_committed_records_rebuild_the_pages_as_declared():
  """Scored once: every page and the summary rebuild from the committed records; each
  experiment's first current sweep of each phase is the declaration's by the identity of its
  first run (report.py --restatus checks all); no open edge; earlier test seeds are looked at."""
  scored = pages.score_all()
  assert any(scored.values()), 'no experiment has committed records'
  wanted, frame_of = [], {}  # each experiment's first current sweep of each phase
  for key in reproduction.PAPERS:
    paper = reproduction.load_paper(key)
    page = (ROOT / 'docs' / 'results' / f'{key}.md').read_text()
    assert pages.render(paper, scored[key]) == page, key
    frame, manifest = runs.read(key)
    assert records.marked(manifest), f'{key}: no status (python scripts/report.py --write)'
    for exp in paper.experiments:
      current = [m for m in manifest if m['experiment'] == exp.key and m['status'] == 'current']
      for phase in ('select', 'test'):
        first = next((m for m in current if m['phase'] == phase), None)
        if first is not None:
          wanted.append((key, exp.key, first))
          frame_of[key] = frame
      for m in manifest:
        if m['experiment'] == exp.key and m['phase'] == 'test' and m['status'] == 'superseded':
          earlier = set(m['seeds']) - set(exp.test_seeds)
          assert earlier <= set(exp.looked), (key, exp.key, sorted(earlier - set(exp.looked)))
    for exp in (e for e in paper.experiments if e.key in scored[key]):
      table = scoring.per_run(runs.current(exp, frame, manifest))
      assert scoring.open_edges(exp, table) == [], (key, exp.key)
  assert pages.render_summary(scored) == (ROOT / 'docs' / 'results' / 'README.md').read_text()
  for (key, exp_key, first), (seed, ident) in zip(wanted, _first_runs(wanted)):
    rows = frame_of[key][records.sweep_rows(frame_of[key], first) & (frame_of[key].seed == seed)]
    where = (key, exp_key, records.label(first))
    assert (ident in set(rows.run)) != (key in STALE_RECORDS), where


def test_an_experiment_declared_not_to_run_runs_only_when_named():
  paper = reproduction.load_paper('masfl')
  long_ = [e.key for e in paper.experiments if not e.run]
  assert long_ == ['fig1_noniid_t600']
  assert 'fig1_noniid_t600' not in [e.key for e in runs.selected(paper)]
  assert [e.key for e in runs.selected(paper)] == [e.key for e in paper.experiments if e.run]
  named = runs.selected(paper, ['fig1_noniid_t600', 'fig1_noniid'])
  assert [e.key for e in named] == ['fig1_noniid', 'fig1_noniid_t600']  # declaration order
  with pytest.raises(UserError, match=r'--only=nope: not among fig1_noniid, '):
    runs.selected(paper, ['nope'])
