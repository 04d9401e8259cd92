"""Reproduction declarations (configs/repro/) and the report generator (scripts/report.py).

Every declaration validates (equal grid budgets, >= 3 seeds, each method's sweep config
passes the config validators), and the generator turns synthetic sweep summaries with
known answers into the right selections, edge flags and verdicts.
"""

import pathlib
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


def _synthetic():
  _, spec = report.load_paper('fedgm')
  grid = {'hparams.client_lr': (0.1, 0.3)}
  methods = tuple(spec.Method(n, 'fedbuff_fmnist', grid=grid) for n in ('A', 'B', 'C'))
  exp = spec.Experiment(
    key='toy',
    title='toy',
    ref='Fig. 0',
    setting='synthetic',
    base=lambda c: None,
    methods=methods,
    claims=(
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
  assert verdicts == ['agrees', 'disagrees', 'inconclusive at this scale', 'agrees']


def test_page_and_summary():
  paper, exp, results = _synthetic()
  scored = {'toy': report.score(exp, results)}
  page = report.render_page(
    paper,
    scored,
    {'toy': results},
    command='python x.py',
    machine='toy box',
    wall_s=1.0,
    plots={'toy': 'toy.png'},
    old_page='toy_old.md',
  )
  assert '**agrees**' in page and '**disagrees**' in page and 'toy box' in page
  assert 'client_lr on high edge' in page and 'Seeds** [0, 1, 2]' in page
  assert 'pending rerun (single-seed page)' in page
  rows = report.summary_rows([paper], {'toy': scored['toy']['claims']})
  assert [r[4] for r in rows][:2] == ['**agrees**', '**disagrees**']
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
