"""afl_jax.results: intervals and paired tests against hand computations, methods over
seeds from run and sweep folders, the table, curves with bands, and scripts/plot.py."""

import functools
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from afl_jax import results
from afl_jax.reproduction import scoring

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T975 = {2: 4.302652729911275, 3: 3.182446305284263}  # t_{0.975, df} from a t table


def t3_cdf(t):
  """Student's t CDF with 3 degrees of freedom, in closed form."""
  u = t / math.sqrt(3)
  return 0.5 + (u / (1 + u * u) + math.atan(u)) / math.pi


def test_t_interval_and_paired_by_hand():
  d = [1.0, 2.0, 3.0, 4.0]
  sd = math.sqrt(5 / 3)  # squares of deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, over n - 1
  half = T975[3] * sd / 2
  st = results.paired(d)
  assert st['n'] == 4 and st['mean'] == 2.5
  assert st['sd'] == pytest.approx(sd, rel=1e-12)
  assert (st['lo'], st['hi']) == pytest.approx((2.5 - half, 2.5 + half), rel=1e-9)
  t = 2.5 / (sd / 2)
  assert st['p'] == pytest.approx(2 * (1 - t3_cdf(t)), rel=1e-9)
  assert results.one_sided_p(d, 1.0, 'greater') == pytest.approx(1 - t3_cdf(1.5 / (sd / 2)))
  assert results.one_sided_p(d, 1.0, 'less') == pytest.approx(t3_cdf(1.5 / (sd / 2)))
  # Edge cases: one value, equal values.
  one = results.paired([0.3])
  assert one['lo'] == -math.inf and one['hi'] == math.inf and one['p'] == 1.0
  same = results.paired([0.2, 0.2, 0.2])
  assert (same['lo'], same['hi'], same['p']) == (0.2, 0.2, 0.0)
  assert results.paired([0.0, 0.0])['p'] == 1.0


def test_statistics_agree_with_scipys_paired_t_test():
  # The reproduction protocol scores claims with these functions (scoring imports them):
  # checked here against scipy's own t-test, an independent implementation.
  rng = np.random.default_rng(0)
  for n in (2, 3, 10):
    d = rng.normal(0.1, 1.0, n)
    ours, ref = results.paired(d), stats.ttest_1samp(d, 0.0)
    ci = ref.confidence_interval(0.95)
    assert (ours['lo'], ours['hi'], ours['p']) == pytest.approx((ci.low, ci.high, ref.pvalue))
    for alt in ('less', 'greater'):
      want = stats.ttest_1samp(d, 0.2, alternative=alt).pvalue
      assert results.one_sided_p(d, 0.2, alt) == pytest.approx(want)
  assert scoring.paired is results.paired and scoring.one_sided_p is results.one_sided_p


def records(accs, dt=2.0, mb=0.5):
  """Evaluations every 10 steps, ``dt`` simulated seconds and ``mb`` MB apart."""
  return [
    {'step': 10 * i, 'wall_clock': dt * i, 'bytes_up': mb * 1e6 * i, 'test_accuracy': a}
    for i, a in enumerate(accs)
  ]


def write_run(d, recs, identity=None, **config):
  """A run folder: its records and, given any config field, a config.json (30 rounds)."""
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, 'metrics.jsonl'), 'w') as f:
    f.writelines(json.dumps(r) + '\n' for r in recs)
  if config:
    cfg = {'algorithm': 'fedbuff', 'hparams': {'client_lr': 0.1}, 'seed': 0, 'num_rounds': 30}
    cfg['target_accuracy'] = 0
    cfg |= {'identity': identity} if identity is not None else {}
    for k, v in config.items():
      *path, last = k.split('.')
      functools.reduce(dict.__getitem__, path, cfg)[last] = v
    with open(os.path.join(d, 'config.json'), 'w') as f:
      json.dump(cfg, f)


# Method A (fedbuff lr 0.1) and B (lr 0.3), three seeds each.
A = {0: [0.1, 0.5, 0.7, 0.6], 1: [0.1, 0.4, 0.8, 0.7], 2: [0.1, 0.6, 0.6, 0.8]}
B = {0: [0.1, 0.3, 0.5, 0.5], 1: [0.1, 0.2, 0.4, 0.6], 2: [0.1, 0.5, 0.6, 0.6]}


@pytest.fixture
def two_methods(tmp_path):
  for name, runs, lr in (('a', A, 0.1), ('b', B, 0.3)):
    for seed, accs in runs.items():
      write_run(tmp_path / f'{name}{seed}', records(accs), seed=seed, **{'hparams.client_lr': lr})
  return tmp_path


def test_table_by_hand(two_methods):
  paths = sorted(str(p) for p in two_methods.iterdir())
  groups = results.methods(results.load(paths))
  assert list(groups) == ['client_lr=0.1', 'client_lr=0.3']
  frame = results.table(groups, target=0.55, baseline='client_lr=0.3')
  a = frame.loc['client_lr=0.1']
  finals = [0.6, 0.7, 0.8]
  half = T975[2] * np.std(finals, ddof=1) / math.sqrt(3)  # sd 0.1
  assert a['final'] == pytest.approx(0.7)
  assert (a['final_lo'], a['final_hi']) == pytest.approx((0.7 - half, 0.7 + half))
  assert a['best'] == pytest.approx(np.mean([0.7, 0.8, 0.8]))
  # Steps to 0.55: A reaches it at steps 20, 20, 10; B never (last: 30), at 30 and 20.
  assert a['steps'] == pytest.approx(50 / 3) and a['reached'] == 3
  b = frame.loc['client_lr=0.3']
  assert b['steps'] == pytest.approx(80 / 3) and b['reached'] == 2
  assert a['seconds'] == pytest.approx(2 * 5 / 3) and a['mb'] == pytest.approx(0.5 * 5 / 3)
  # Paired by seed: final A - B = 0.1, 0.1, 0.2.
  d = [0.1, 0.1, 0.2]
  half = T975[2] * np.std(d, ddof=1) / math.sqrt(3)
  assert a['diff_final'] == pytest.approx(np.mean(d))
  assert a['diff_final_lo'] == pytest.approx(np.mean(d) - half)
  assert a['diff_final_n'] == 3
  assert a['diff_steps'] == -10 and a['diff_steps_lo'] == -10  # equal: no spread
  text = results.markdown(frame)
  assert '| client_lr=0.1 |' in text and '3/3' in text and '2/3' in text
  assert '>= 27 [' in text  # B's steps: a lower bound
  assert 'Δ final vs client_lr=0.3' in text and '(n=3)' in text
  # A's steps minus B's lower bounds: an upper bound on the difference.
  assert a['diff_steps_bound'] == '<=' and '<= -10' in text


def test_stopped_and_diverged_runs_are_counted_never_averaged_and_pairs_show_n(tmp_path):
  nan = float('nan')
  runs = {
    'a0': (A[0], 0, 0.1),
    'a1': (A[1][:3], 1, 0.1),  # stopped at step 20 of 30
    'a2': (A[2][:2] + [nan, nan], 2, 0.1),  # diverged at step 20
    'b0': (B[0], 0, 0.3),
    'b1': (B[1], 1, 0.3),
    'b2': (B[2], 2, 0.3),
  }
  for name, (accs, seed, lr) in runs.items():
    recs = records(accs)
    for r in recs[2:] if name == 'a2' else []:
      r['stopped'] = 'non-finite test_accuracy at server step 20'
    write_run(tmp_path / name, recs, seed=seed, **{'hparams.client_lr': lr})
  got = results.load(sorted(str(p) for p in tmp_path.iterdir()))
  statuses = ['completed', 'stopped at step 20', 'diverged at step 20'] + ['completed'] * 3
  assert [r.status for r in got] == statuses
  frame = results.table(results.methods(got), baseline='client_lr=0.3')
  a = frame.loc['client_lr=0.1']
  assert (a['seeds'], a['stopped'], a['diverged']) == (1, 1, 1)
  assert a['final'] == 0.6  # seed 0 alone: the stopped and diverged runs are not averaged
  assert a['diff_final_n'] == 1 and a['diff_final'] == pytest.approx(0.6 - 0.5)  # seed 0 only
  text = results.markdown(frame)
  assert '1, 1 stopped, 1 diverged' in text and '(n=1)' in text


def test_best_follows_the_metric_direction_and_a_budget_reads_every_run_there(tmp_path):
  for seed, accs in A.items():
    recs = records(accs)
    for r, loss in zip(recs, (2.0, 1.0, 0.5, 0.7)):
      r['test_loss'] = loss
    write_run(tmp_path / f'a{seed}', recs[: 3 if seed == 2 else 4], seed=seed)
  runs = results.load(sorted(str(p) for p in tmp_path.iterdir()))
  frame = results.table(results.methods(runs), metric='test_loss')
  assert frame.iloc[0]['best'] == 0.5 and frame.iloc[0]['final'] == 0.7  # min, not max
  assert frame.iloc[0]['seeds'] == 2  # seed 2 stopped at step 20 of 30
  # A loss target is reached at or below it: 0.9 first at step 20 (2.0 at step 0 is above).
  frame = results.table(results.methods(runs), metric='test_loss', target=0.9)
  assert frame.iloc[0]['steps'] == 20 and frame.iloc[0]['reached'] == 2
  assert 'steps to <= 0.9' in results.markdown(frame)
  assert results.table(results.methods(runs), metric='test_loss').attrs['target'] is None
  # At 4 simulated seconds (step 20) every run got there, seed 2 included: 3 seeds.
  at = results.parse_at('seconds:4')
  frame = results.table(results.methods(runs), at=at)
  assert frame.iloc[0]['seeds'] == 3
  assert frame.iloc[0]['final'] == pytest.approx(np.mean([A[s][2] for s in range(3)]))
  assert frame.iloc[0]['best'] == pytest.approx(np.mean([0.7, 0.8, 0.6]))
  curve = results.curves(runs, 'seconds', at=results.parse_at('mb:1'))
  assert curve['n'] == 3 and curve['x'][-1] == 4.0
  with pytest.raises(results.ResultsError, match="--at='hours:3' is invalid"):
    results.parse_at('hours:3')


def test_runs_on_other_files_or_code_are_labelled_apart(tmp_path):
  ident = lambda data: {'sources': {'dataset': data}, 'code': {}, 'engine': {'devices': 1}}
  for seed in (0, 1):
    write_run(tmp_path / f'x{seed}', records(A[seed]), ident('aaaa1111'), seed=seed)
    write_run(tmp_path / f'y{seed}', records(B[seed]), ident('bbbb2222'), seed=seed)
  groups = results.methods(results.load(sorted(str(p) for p in tmp_path.iterdir())))
  assert sorted(groups) == ['dataset file=aaaa1111', 'dataset file=bbbb2222']


def test_same_seed_twice_is_never_merged(tmp_path):
  # Two copies of one sweep: sweepA/seed=0 and sweepB/seed=0 with the same config.
  for sweep in ('sweepA', 'sweepB'):
    for seed in (0, 1):
      write_run(tmp_path / sweep / f'seed={seed}', records(A[seed]), seed=seed)
  groups = results.methods(results.load([tmp_path / 'sweepA', tmp_path / 'sweepB']))
  assert sorted(groups) == ['fedbuff (sweepA)', 'fedbuff (sweepB)']
  assert all(len(v) == 2 for v in groups.values())
  # Run folders without a config: a method each, labelled by the shortest distinct path.
  write_run(tmp_path / 'x' / 'seed=0', records(A[0]))
  write_run(tmp_path / 'y' / 'seed=0', records(B[0]))
  groups = results.methods(results.load([tmp_path / 'x' / 'seed=0', tmp_path / 'y' / 'seed=0']))
  assert sorted(groups) == ['x/seed=0', 'y/seed=0']


def test_a_sweep_folder_is_the_runs_its_summary_lists(tmp_path):
  sweep = tmp_path / 'grid'
  names = []
  for lr in (0.1, 0.3):
    for seed in (0, 1):
      names.append({'name': f'client_lr={lr},seed={seed}'})
      recs = records((A if lr == 0.1 else B)[seed])
      write_run(sweep / names[-1]['name'], recs, seed=seed, **{'hparams.client_lr': lr})
  write_run(sweep / 'another_grids_run', records(A[0]), seed=0)
  (sweep / 'summary.json').write_text(json.dumps({'runs': names}))
  groups = results.methods(results.load([sweep]))
  assert sorted(groups) == ['client_lr=0.1', 'client_lr=0.3']
  assert [r.seed for r in groups['client_lr=0.1']] == [0, 1]


def test_curves_average_seeds_with_bands(two_methods):
  groups = results.methods(results.load(sorted(str(p) for p in two_methods.iterdir())))
  c = results.curves(groups['client_lr=0.1'], 'seconds')
  np.testing.assert_allclose(c['x'], [0, 2, 4, 6])
  ys = np.array([A[s] for s in range(3)])
  np.testing.assert_allclose(c['mean'], ys.mean(0))
  half = T975[2] * ys.std(0, ddof=1) / math.sqrt(3)
  np.testing.assert_allclose(c['hi'], ys.mean(0) + half)
  assert results.curves(groups['client_lr=0.1'], 'mb')['x'][-1] == pytest.approx(1.5)
  with pytest.raises(results.ResultsError, match="--x='hours' is invalid"):
    results.curves(groups['client_lr=0.1'], 'hours')


def test_plot_script_table_and_bands(two_methods, tmp_path):
  # Same folder names under two parents: two curves, and the table with a baseline.
  for name in ('sweepA', 'sweepB'):
    for seed in (0, 1):
      write_run(tmp_path / name / 'seed=0' / str(seed), records(A[seed]))
  out = tmp_path / 'c.png'
  a, b = (tmp_path / name / 'seed=0' for name in ('sweepA', 'sweepB'))
  cmd = [sys.executable, os.path.join(REPO, 'scripts', 'plot.py'), a, b, f'--out={out}', '--x=mb']
  cmd += ['--table', '--target=0.5']
  env = dict(os.environ, PYTHONPATH=REPO)
  p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
  assert p.returncode == 0, p.stderr
  assert '(4 methods)' in p.stdout and out.stat().st_size > 0
  assert 'sweepA/seed=0/0' in p.stdout and 'sweepB/seed=0/1' in p.stdout
  groups = results.methods(results.load(sorted(two_methods.glob('[ab]*'))))
  with pytest.raises(results.ResultsError, match=r"^--baseline='nope' is not a method"):
    results.table(groups, baseline='nope')  # plot.py: one error line (tests/faults_test.py)
