"""Reproduction declarations (configs/repro/) and the report generator (scripts/report.py).

Every declaration validates (equal grid budgets, >= 3 seeds, each method's sweep config
passes the config validators), and the generator turns synthetic sweep summaries with
known answers into the right selections, edge flags and verdicts.
"""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import pytest

from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import sweep

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'scripts'))
import report  # noqa: E402

PAPERS = sorted(p.stem for p in (ROOT / 'configs' / 'repro').glob('*.py') if p.stem != 'spec')


def test_every_paper_is_declared():
  assert set(report.PAPERS) <= set(PAPERS)


@pytest.mark.parametrize('key', PAPERS)
def test_declaration_validates(key):
  paper, spec = report.load_paper(key)
  assert paper.key == key
  spec.check(paper)
  for exp in paper.experiments:
    for method in exp.methods:
      c = spec.sweep_config(exp, method)
      config_lib.validate(config_lib.resolve(c))
      sweep.validate_section(c)
      assert len(sweep.grid(c)) == method.budget * len(exp.seeds)


def _records(label, table):
  """table: {lr: [(val, test) per seed]} -> sweep summary records."""
  return [
    {
      'name': f'{label}-lr={lr},seed={seed}',
      'method': label,
      'seed': seed,
      'hparams': {'hparams.client_lr': lr},
      'val_accuracy': val,
      'test_accuracy': test,
    }
    for lr, runs in table.items()
    for seed, (val, test) in enumerate(runs)
  ]


def _toy(spec, labels, lrs, claims, **kw):
  """A synthetic experiment 'toy': methods ``labels`` tuned on the client rates ``lrs``."""
  grid = {'hparams.client_lr': lrs}
  return spec.Experiment(
    key='toy',
    title='toy',
    ref='Fig. 0',
    setting='synthetic',
    base=lambda c: None,
    methods=tuple(spec.Method(n, 'fedbuff_fmnist', grid=grid) for n in labels),
    claims=claims,
    **kw,
  )


def _synthetic():
  _, spec = report.load_paper('fedgm')
  exp = _toy(
    spec,
    ('A', 'B', 'C'),
    (0.1, 0.3),
    (
      spec.Claim('Fig. 0', 'A beats B', 'A', 'B'),
      spec.Claim('Fig. 0', 'B beats A', 'B', 'A'),
      spec.Claim('Fig. 0', 'C beats A', 'C', 'A'),
      spec.Claim('Fig. 0', 'B beats A at lr 0.1', 'B', 'A', at={'hparams.client_lr': 0.1}),
    ),
    axis='hparams.client_lr',
  )
  noise = (0.0, 0.01, -0.01)
  results = {
    # A is best at lr = 0.3 (the grid's high edge), ~0.80.
    'A': _records('A', {0.1: [(0.7, 0.6)] * 3, 0.3: [(0.8, 0.80 + e) for e in noise]}),
    # B is best at lr = 0.1, ~0.70: clearly below A (paired, many seed-stds).
    'B': _records('B', {0.1: [(0.72, 0.70 + e) for e in noise], 0.3: [(0.5, 0.5)] * 3}),
    # C ties A within seed noise; its lr = 0.1 run diverged (nan) in one seed.
    'C': _records(
      'C',
      {
        0.1: [(float('nan'), float('nan'))] + [(0.6, 0.6)] * 2,
        0.3: [(0.8, 0.8 - 2 * e) for e in noise],
      },
    ),
  }
  results = {k: {'records': v, 'curves': {}, 'seconds': 60.0} for k, v in results.items()}
  paper = spec.Paper(
    key='toy',
    number='999',
    citation='Toy',
    setting='toy',
    experiments=(exp,),
    pending=(('Fig. 9', 'an undecided claim'),),
  )
  return paper, exp, results


def _render(paper, scored, results, *, machine='m', old_page=None, kept=None):
  """``report.render_page`` with a plot named after each scored experiment."""
  return report.render_page(
    paper,
    scored,
    results,
    command='python x.py',
    machine=machine,
    wall_s=1.0,
    plots={k: f'{k}.png' for k in scored},
    old_page=old_page,
    kept=kept,
  )


def test_score_selects_on_validation_and_flags_edges():
  _, exp, results = _synthetic()
  s = report.score(exp, results)
  sel = {r['method']: r for r in s['selected']}
  assert sel['A']['selected'] == 'client_lr=0.3' and 'high edge' in sel['A']['edges']
  assert sel['B']['selected'] == 'client_lr=0.1' and 'low edge' in sel['B']['edges']
  assert sel['A']['test_mean'] == pytest.approx(0.80)
  assert s['axis']['B'][0.3][0] == pytest.approx(0.5)


def test_verdicts():
  _, exp, results = _synthetic()
  verdicts = [c['verdict'] for c in report.score(exp, results)['claims']]
  edge = report.EDGE_NOTE  # B, the loser of both decided claims, sits on its low edge
  assert verdicts == ['agrees' + edge, 'disagrees' + edge, 'inconclusive at this scale', 'agrees']


def test_edge_note_only_when_the_loser_is_on_an_edge():
  _, spec = report.load_paper('fedgm')
  claims = (
    spec.Claim('Fig. 0', 'A beats B', 'A', 'B'),
    spec.Claim('Fig. 0', 'B beats A', 'B', 'A'),
    spec.Claim('Fig. 0', 'A matches B', 'A', 'B', kind='equivalent', margin=0.01),
  )
  exp = _toy(spec, ('A', 'B'), (0.1, 0.3, 1.0), claims)
  noise = (0.0, 0.01, -0.01)
  low = [(0.5, 0.5)] * 3
  results = {  # A wins on its high edge; B, the loser, is selected inside its grid
    'A': _records('A', {0.1: low, 0.3: low, 1.0: [(0.8, 0.80 + e) for e in noise]}),
    'B': _records('B', {0.1: low, 0.3: [(0.72, 0.70 + e) for e in noise], 1.0: low}),
  }
  results = {k: {'records': v, 'curves': {}, 'seconds': 60.0} for k, v in results.items()}
  verdicts = [c['verdict'] for c in report.score(exp, results)['claims']]
  assert verdicts == ['agrees', 'disagrees', 'disagrees']
  # The same with B the one on the edge: every decided verdict carries the note.
  results['B']['records'] = _records(
    'B', {0.1: [(0.72, 0.70 + e) for e in noise], 0.3: low, 1.0: low}
  )
  verdicts = [c['verdict'] for c in report.score(exp, results)['claims']]
  assert verdicts == [v + report.EDGE_NOTE for v in ('agrees', 'disagrees', 'disagrees')]


def test_page_and_summary():
  paper, exp, results = _synthetic()
  scored = {'toy': report.score(exp, results)}
  page = _render(paper, scored, {'toy': results}, machine='toy box', old_page='toy_old.md')
  assert '**agrees**' in page and '**disagrees**' in page and 'toy box' in page
  assert 'client_lr on high edge' in page and 'Seeds** [0, 1, 2]' in page
  assert 'pending rerun (single-seed page)' in page
  rows = report.summary_rows([paper], {'toy': scored['toy']['claims']})
  edge = report.EDGE_NOTE
  assert [r[4] for r in rows][:2] == [f'**agrees{edge}**', f'**disagrees{edge}**']
  assert rows[-1][4] == 'pending rerun (single-seed page)'
  unscored = report.summary_rows([paper], {'toy': None})
  assert all(r[4] == 'pending rerun (single-seed page)' for r in unscored)


def test_finished_sweep_survives_a_new_default_field_but_no_other_change():
  paper, spec = report.load_paper('fedgm')
  exp = paper.experiments[0]
  import json

  declared = json.loads(spec.sweep_config(exp, exp.methods[0]).to_json_best_effort())
  assert report.same_declared(declared, declared)
  old = json.loads(json.dumps(declared))
  del old['target_accuracy']  # a field the library added later, at its default
  assert report.same_declared(old, declared)
  changed = json.loads(json.dumps(declared))
  changed['target_accuracy'] = 0.5
  assert not report.same_declared(old, changed)  # added, but not at its default
  changed = json.loads(json.dumps(declared))
  changed['schedule']['concurrency'] += 1
  assert not report.same_declared(declared, changed)
  del old['num_rounds']
  assert not report.same_declared(declared, old)  # removed
  assert not report.same_declared(None, declared)


# ---- time/upload to target and claims on other metrics ---------------------------------
def _curve(accs, mb_per_step=1.0, every=5, with_bytes=True):
  """Evaluation records every ``every`` steps with these test accuracies."""
  out = []
  for i, acc in enumerate(accs):
    rec = {'step': i * every, 'wall_clock': 2.0 * i * every, 'test_accuracy': acc}
    if with_bytes:
      rec['bytes_up'] = 1e6 * mb_per_step * i * every
    out.append(rec)
  return out


def test_to_target_and_default_target():
  curve = _curve([0.1, 0.5, 0.8, 0.7])
  hit = report.to_target(curve, 0.75)
  assert hit['steps_to_target'] == (10.0, True)
  assert hit['clock_to_target'] == (20.0, True)
  assert hit['mb_to_target'] == (pytest.approx(10.0), True)
  miss = report.to_target(curve, 0.9)  # never reached: the last evaluation, a lower bound
  assert miss['steps_to_target'] == (15.0, False)
  old = report.to_target(_curve([0.1, 0.8], with_bytes=False), 0.75)
  assert old['mb_to_target'] == (None, True) and old['steps_to_target'] == (5.0, True)
  assert report.default_target([0.8, 0.9, 0.0, float('nan'), 0.7]) == 0.72


def _target_experiment():
  """A: 10x less upload than B, as fast; C: slower than A, equal accuracy; D misses."""
  _, spec = report.load_paper('fedgm')
  grid = {'hparams.client_lr': (0.1, 0.3)}
  labels = ('A', 'B', 'C', 'D', 'E')
  claims = (
    spec.Claim('T', 'A needs 10x less upload than B', 'A', 'B', metric='mb_to_target', factor=5),
    spec.Claim('T', 'A needs 20x less upload than B', 'A', 'B', metric='mb_to_target', factor=20),
    spec.Claim(
      'T', 'A as fast as B', 'A', 'B', metric='steps_to_target', kind='equivalent', margin=5.0
    ),
    spec.Claim(
      'T', 'C as fast as A', 'C', 'A', metric='steps_to_target', kind='equivalent', margin=5.0
    ),
    spec.Claim('T', 'C matches A in accuracy', 'C', 'A', kind='equivalent', margin=0.02),
    spec.Claim('T', 'D faster than A', 'D', 'A', metric='steps_to_target'),
    spec.Claim('T', 'A faster than D', 'A', 'D', metric='steps_to_target'),
    spec.Claim('T', 'A faster than C', 'A', 'C', metric='steps_to_target'),
    spec.Claim('T', 'E faster than C', 'E', 'C', metric='steps_to_target'),
  )
  exp = spec.Experiment(
    'tt',
    'tt',
    'T',
    'synthetic',
    lambda c: None,
    tuple(spec.Method(n, 'fedbuff_fmnist', grid=grid) for n in labels),
    claims=claims,
    target=0.75,
  )
  curves = {  # per method and seed: the selected (lr = 0.1) setting's curve
    'A': [_curve([0.1, 0.8, 0.80 + e], mb_per_step=0.1) for e in (0.0, 0.004, -0.004)],
    'B': [_curve([0.1, 0.8, 0.80 + e], mb_per_step=1.0) for e in (0.0, 0.004, -0.004)],
    'C': [_curve([0.1, 0.5, 0.6, 0.7, 0.76, 0.80 + e]) for e in (0.001, 0.005, -0.003)],
    'D': [_curve([0.1, 0.5, 0.6, 0.6, 0.6, 0.6])] * 3,  # never reaches the target
    'E': [_curve([0.1, 0.8, 0.8])] * 2 + [_curve([0.1, 0.5])],  # misses on one (short) seed
  }
  results = {}
  for label, per_seed in curves.items():
    records, store = [], {}
    for lr, val in ((0.1, 0.8), (0.3, 0.5)):
      for seed, curve in enumerate(per_seed):
        name = f'{label}-lr={lr},seed={seed}'
        curve = curve if lr == 0.1 else _curve([0.1, 0.5])
        store[name] = curve
        records.append(
          {
            'name': name,
            'method': label,
            'seed': seed,
            'hparams': {'hparams.client_lr': lr},
            'val_accuracy': val,
            'test_accuracy': curve[-1]['test_accuracy'],
          }
        )
    results[label] = {'records': records, 'curves': store, 'seconds': 1.0}
  return spec, exp, results


def test_target_table_and_metric_claims():
  spec, exp, results = _target_experiment()
  spec.check(spec.Paper('tt', '999', 'x', 'x', (exp,)))
  s = report.score(exp, results)
  assert s['target'] == 0.75 and s['target_declared']
  rows = {r['method']: r for r in s['to_target']}
  assert rows['A']['steps_to_target'] == (5.0, 0.0) and rows['A']['not_reached'] == 0
  assert rows['A']['mb_to_target'][0] == pytest.approx(0.5)
  assert rows['B']['mb_to_target'][0] == pytest.approx(5.0)
  assert rows['C']['steps_to_target'] == (20.0, 0.0)
  assert rows['D']['not_reached'] == 3 and rows['D']['steps_to_target'] is None
  assert rows['E']['not_reached'] == 1 and rows['E']['steps_to_target'] == (5.0, 0.0)
  # Every selection here is lr = 0.1, the low edge of a 2-value grid: the edge note is
  # tested in test_edge_note_only_when_the_loser_is_on_an_edge.
  verdicts = {c['text']: c['verdict'].removesuffix(report.EDGE_NOTE) for c in s['claims']}
  # Constant paired differences over 3 seeds: 5 x 0.5 MB < 5 MB agrees; 20 x 0.5 > 5 disagrees.
  assert verdicts['A needs 10x less upload than B'] == 'agrees'
  assert verdicts['A needs 20x less upload than B'] == 'disagrees'
  assert verdicts['A as fast as B'] == 'agrees'  # identical steps on every seed
  assert verdicts['C as fast as A'] == 'disagrees'  # 15 steps slower on every seed
  assert verdicts['C matches A in accuracy'] == 'agrees'  # CI of a few 1e-3 within 0.02
  # D never reached the target (its values are lower bounds): A is faster, D is not.
  assert verdicts['A faster than D'] == 'agrees'
  assert verdicts['D faster than A'] == 'disagrees'
  # E missed on one seed, where its lower bound (5 steps) flatters it: no 'agrees'.
  assert verdicts['E faster than C'].startswith('inconclusive: target not reached')
  assert verdicts['A faster than C'] == 'agrees'
  page = _render(spec.Paper('tt', '999', 'x', 'x', (exp,)), {'tt': s}, {'tt': results})
  assert 'Time and upload to 75% test accuracy' in page and '3/3' in page
  assert 'MB uploaded to target 75%, 5 A < B' in page


def test_old_sweep_without_bytes_shows_dash():
  spec, exp, results = _target_experiment()
  for r in results.values():
    for curve in r['curves'].values():
      for rec in curve:
        rec.pop('bytes_up', None)
  s = report.score(exp, results)
  assert all(r['mb_to_target'] is None for r in s['to_target'])
  assert s['to_target'][0]['steps_to_target'] == (5.0, 0.0)
  c = next(c for c in s['claims'] if c['metric'] == 'mb_to_target')
  assert c['verdict'].startswith('not measurable') and c['better'] == '—'
  exp_default = spec.Experiment('tt', 'tt', 'T', 'x', lambda c: None, exp.methods)
  s = report.score(exp_default, results)
  assert not s['target_declared'] and s['target'] == 0.72  # 0.9 x median of 0.8s


def test_declaration_checks_claims():
  _, spec = report.load_paper('fedgm')
  m = (spec.Method('A', 'fedbuff_fmnist', grid={}), spec.Method('B', 'fedbuff_fmnist', grid={}))
  for bad in (
    spec.Claim('x', 'x', 'A', 'B', metric='loss'),
    spec.Claim('x', 'x', 'A', 'B', kind='equivalent'),
    spec.Claim('x', 'x', 'A', 'B', factor=10.0),  # on accuracy: meaningless
  ):
    exp = spec.Experiment('e', 'e', 'e', 'e', lambda c: None, m, claims=(bad,))
    with pytest.raises(ValueError):
      spec.check(spec.Paper('p', '9', 'x', 'x', (exp,)))


def test_plot_with_upload_panel(tmp_path):
  _, exp, results = _target_experiment()
  s = report.score(exp, results)
  report.plot_experiment(exp, results, s, str(tmp_path / 'tt.png'))
  assert (tmp_path / 'tt.png').stat().st_size > 0


def test_sensitivity_claim_scores_the_drops():
  """A loses 0.05 from its reference condition, B 0.15 (paired, every seed): A agrees."""
  _, spec = report.load_paper('fedgm')
  claims = (
    spec.Claim('T', 'A loses less than B', 'A', 'B', baseline=('A0', 'B0')),
    spec.Claim('T', 'B loses less than A', 'B', 'A', baseline=('B0', 'A0')),
    spec.Claim('T', 'A0 beats A', 'A0', 'A'),
  )
  exp = _toy(spec, ('A0', 'A', 'B0', 'B'), (0.1, 0.3, 1.0), claims)
  spec.check(spec.Paper('p', '9', 'x', 'x', (exp,)))
  noise = (0.0, 0.02, -0.02)  # shared by every method: the drops are exact
  low = [(0.5, 0.5)] * 3
  level = {'A0': 0.80, 'A': 0.75, 'B0': 0.85, 'B': 0.70}
  results = {
    n: {
      'records': _records(n, {0.1: low, 0.3: [(v, v + e) for e in noise], 1.0: low}),
      'curves': {},
      'seconds': 1.0,
    }
    for n, v in level.items()
  }
  claims = report.score(exp, results)['claims']
  assert [c['verdict'] for c in claims] == ['agrees', 'disagrees', 'agrees']
  assert claims[0]['better'] == '0.050 ± 0.000' and claims[0]['worse'] == '0.150 ± 0.000'
  assert 'drop in final test accuracy' in report._claim_metric(claims[0])
  bad = spec.Claim('T', 'x', 'A', 'B', baseline=('A0', 'C0'))
  with pytest.raises(ValueError, match='unknown method'):
    spec.check(spec.Paper('p', '9', 'x', 'x', (dataclasses.replace(exp, claims=(bad,)),)))


def test_keeping_leaves_the_methods_field():
  _, spec = report.load_paper('fedfa')

  def base(c):
    c.schedule.concurrency = 10
    c.num_rounds = 7

  c = spec.load_config('fedbuff_fmnist')
  c.schedule.concurrency = 50
  spec.keeping(base, 'schedule.concurrency')(c)
  assert c.schedule.concurrency == 50 and c.num_rounds == 7


def test_stored_sections_stand_until_the_declaration_changes(tmp_path, monkeypatch):
  """A page keeps an experiment scored earlier (section, claims, minutes, machine) from
  the JSON while its sweep configs are unchanged, and drops it when they change."""
  paper, exp, results = _synthetic()
  paper = dataclasses.replace(paper, key='toy', pending=())
  monkeypatch.setattr(report, 'RESULTS', tmp_path)
  results = {k: dict(v, machine='box A') for k, v in results.items()}
  scored = report.score(exp, results)
  entry = report.stored_entry(exp, scored, results, 'toy.png')
  assert entry['minutes'] == pytest.approx(3.0) and entry['machine'] == 'box A'
  (tmp_path / 'toy.json').write_text(json.dumps({'experiments': {'toy': entry}}))
  kept = report.stored_sections(paper)
  assert set(kept) == {'toy'} and kept['toy']['claims'] == json.loads(json.dumps(scored['claims']))
  assert '**Grids and selections**' in kept['toy']['markdown']
  again = _render(paper, {}, {}, machine='box B', kept=kept)
  assert '3.0 min of compute' in again and 'Declared, not run yet' not in again
  assert again.count('**Machine.** box A; sweeps 3.0 min.') == 1
  fresh = _render(paper, {'toy': scored}, {'toy': results}, machine='box B')
  assert again.split('## toy')[1] == fresh.split('## toy')[1]  # kept = as rendered fresh
  changed = dataclasses.replace(
    exp, methods=(dataclasses.replace(exp.methods[0], fixed={'num_rounds': 3}),) + exp.methods[1:]
  )
  assert report.stored_sections(dataclasses.replace(paper, experiments=(changed,))) == {}


def test_reproduce_unknown_only_key_is_one_line(tmp_path):
  proc = subprocess.run(
    [sys.executable, str(ROOT / 'scripts' / 'reproduce_fedfa.py'), '--only=table9',
     f'--out_dir={tmp_path}'],
    capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS='cpu'), timeout=300,
  )  # fmt: skip
  assert proc.returncode != 0
  lines = proc.stderr.strip().splitlines()
  assert lines == [lines[-1]] and lines[-1].startswith('error: --only=table9 is invalid: table9')
  assert 'table2' in lines[-1] and 'Traceback' not in proc.stderr
