"""The result pages, rebuilt from the committed per-run records alone.

``docs/results/<paper>.md`` (one section per experiment: setting, deviations, machine
and sweep time, selection on the selection seeds, the selected settings on the test
seeds, time to target, claims with raw and adjusted verdicts, plot) and the summary
``docs/results/README.md`` (the tally of paper claims after the FDR adjustment, every
claim, the project's own contrasts in their own table). :func:`render` returns the
text without writing; a test rebuilds a committed page this way and compares.
"""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Mapping, Sequence

import pandas as pd

from afl_jax import reproduction
from afl_jax.reproduction import runs, scoring, spec

RESULTS = os.path.dirname(runs.RECORDS)

PROTOCOL = (
  'Every method of an experiment is tuned on the same number of grid settings. '
  "**Selection**: each setting runs on the selection seeds; a method's setting is the one "
  'with the best mean final **validation** accuracy (a split held out of the training '
  'data); a run that diverged scores 0. **Test**: only the selected settings run again, '
  'on fresh test seeds (the seed varies the data split, the schedule and the initial '
  'model), and every claim is scored there: the per-seed paired difference (oriented so '
  'that positive favours the claim), its mean with the 95% t interval, and its p-value. '
  'A claim on steps, simulated seconds or MB to a target reads each curve at its first '
  'evaluation at or above the target (fixed from the selection phase before the test '
  'runs); a seed that never reaches it counts with its last value, a lower bound, so the '
  'claim cannot agree when A missed on a seed, nor disagree when B did. '
  f'**Verdicts**: *agrees* / *disagrees*: paired t-test p < {scoring.ALPHA}; *equivalent within '
  'the margin*: both one-sided tests against ±m reject (TOST); *smaller than the '
  "paper's effect*: the one-sided test against the paper's own effect size rejects; "
  '*condition not reproduced*: the setting does not show the effect the claim is about '
  f'(the declared reference beats the harsh condition with p < {scoring.ALPHA}); an event claim '
  '(diverges, never reaches the target) agrees when it happens on every test seed and '
  'disagrees when on none (exact binomial p). The p-values of all paper claims in the '
  f'summary are adjusted together (Benjamini-Hochberg at {scoring.ALPHA}); the **adjusted** '
  f'verdict keeps a decided raw verdict only when its adjusted p is below {scoring.ALPHA}. '
  'There is no effect-size floor: the interval states the size. An inconclusive claim lists the '
  'test seeds that would give 80% power at its observed effect and spread (before the '
  'adjustment). A decided verdict whose losing method was selected on an edge of its grid '
  '(the smallest or largest value tried of a swept rate) names that edge beside it: a '
  'wider grid might move it.'
)


def _claims(e: spec.Experiment) -> str:
  return f'{len(e.claims)} claim' + ('' if len(e.claims) == 1 else 's')


def score_paper(paper: spec.Paper, records_dir: str = runs.RECORDS) -> dict:
  """Per experiment with test records: selections, test table, target, raw claims."""
  everything, manifest = runs.read(paper.key, records_dir)
  frame = pd.concat([runs.current(exp, everything, manifest) for exp in paper.experiments])
  fin = scoring.finals(frame) if len(frame) else frame
  out = {}
  for exp in paper.experiments:
    have = fin[(fin.experiment == exp.key)] if len(fin) else fin
    if not len(have) or set(have[have.phase == 'select'].method) < {m.label for m in exp.methods}:
      continue
    tested = set(zip(have.method[have.phase == 'test'], have.setting[have.phase == 'test']))
    wanted = scoring.test_settings(exp, fin)
    if any((m, k) not in tested for m, keys in wanted.items() for k in keys):
      continue  # a test sweep the claims need has not run (e.g. after a new selection)
    target = scoring.target_of(exp, fin)
    claims = [scoring.score_claim(exp, c, frame, fin, target) for c in exp.claims]
    out[exp.key] = {
      'exp': exp,
      'target': target,
      'claims': claims,
      'selection': _selection_rows(exp, fin),
      'test': _test_rows(exp, frame, fin),
      'to_target': _target_rows(exp, frame, fin, target),
      'sweeps': [m for m in manifest if m['experiment'] == exp.key],
    }
  return out


def score_all(records_dir: str = runs.RECORDS) -> dict[str, dict]:
  """Every paper scored; the paper claims adjusted together, the added contrasts apart."""
  scored = {
    key: score_paper(reproduction.load_paper(key), records_dir) for key in reproduction.PAPERS
  }
  for added in (False, True):
    family = [
      (s['claims'], i)
      for exps in scored.values()
      for s in exps.values()
      for i, c in enumerate(s['claims'])
      if c['added'] == added
    ]
    for (claims, i), claim in zip(family, scoring.adjust([cs[i] for cs, i in family])):
      claims[i] = claim
  return scored


def _selection_rows(exp: spec.Experiment, fin: pd.DataFrame) -> pd.DataFrame:
  rows = []
  for m in exp.methods:
    s = scoring.select(fin, exp.key, m.label)
    mine = scoring.rows(fin, exp.key, m.label, 'select')
    rows.append(
      {
        'method': m.label,
        'grid': '; '.join(f'{k.rsplit(".", 1)[-1]} in {list(v)}' for k, v in m.grid.items()),
        'selected (validation)': scoring._short(s['setting']),
        'edge': ', '.join(s['edges']) or '—',
        'val acc': f'{s["val"]:.3f}',
        'diverged runs': int(mine.diverged.sum()),
      }
    )
  return pd.DataFrame(rows)


def _selected_test(exp: spec.Experiment, frame: pd.DataFrame, fin: pd.DataFrame, label: str):
  """``label``'s selected setting, and its rows of ``frame`` on the test seeds."""
  key = scoring.select(fin, exp.key, label)['setting']
  return key, scoring.rows(frame, exp.key, label, 'test', key)


def _test_rows(exp: spec.Experiment, frame: pd.DataFrame, fin: pd.DataFrame) -> pd.DataFrame:
  """Selected settings on the test seeds; 'last-quarter gain': the mean test accuracy
  gained over the last quarter of the run (large = the curve has not flattened)."""
  rows = []
  for m in exp.methods:
    key, mine = _selected_test(exp, fin, fin, m.label)
    curve = _selected_test(exp, frame, fin, m.label)[1].groupby('step').test_accuracy.mean()
    steps = curve.index.to_numpy()
    quarter = steps[-1] - (steps[-1] - steps[0]) / 4
    before = curve[curve.index <= quarter].iloc[-1]
    rows.append(
      {
        'method': m.label,
        'setting': scoring._short(key),
        'seeds': len(mine),
        'test acc': f'{mine.test_accuracy.mean():.3f} ± {mine.test_accuracy.std(ddof=1):.3f}',
        'diverged': int(mine.diverged.sum()),
        'last-quarter gain': f'{curve.iloc[-1] - before:+.3f}',
      }
    )
  return pd.DataFrame(rows)


def _target_rows(exp, frame, fin, target) -> pd.DataFrame | None:
  if not any(c.metric in scoring.TO_TARGET for c in exp.claims):
    return None
  rows = []
  for m in exp.methods:
    key = scoring.select(fin, exp.key, m.label)['setting']
    row = {'method': m.label}
    for metric in scoring.TO_TARGET:
      v = scoring.per_seed(frame, fin, exp.key, m.label, key, metric, target)
      row['reached'] = f'{int(v.reached.sum())}/{len(v)}'
      row[spec.METRICS[metric][0]] = f'{v.value.mean():.4g} ± {v.value.std(ddof=1):.3g}'
    rows.append(row)
  return pd.DataFrame(rows)


def _num(x, fmt='{:.3f}') -> str:
  return '—' if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def _edge_note(c: Mapping) -> str:
  """Beside a decided verdict: the methods it goes against that were selected on an edge
  of their grid (a wider grid might move it)."""
  edges = c.get('edges_against', []) if c['verdict'] in scoring.DECIDED else []
  return f' (against a grid edge: {"; ".join(edges)})' if edges else ''


def claim_rows(claims: Sequence[Mapping], paper: str | None = None) -> pd.DataFrame:
  """The claims table; with ``paper`` (the summary), a paper column and no quotes."""
  rows = []
  for c in claims:
    unit = spec.METRICS[c['metric']][0]
    if c['kind'] == 'on_seeds':
      measured = f'on {round(c["mean"] * c["n"])}/{c["n"]} seeds'
    else:
      measured = f'{c["mean"]:+.3f} [{c["lo"]:+.3f}, {c["hi"]:+.3f}]'
    if c['kind'] == 'equivalent':
      unit += f', abs(A - B) <= {c["margin"]:g}'
    if c.get('target') is not None:
      unit += f' (target {c["target"]:.2f})'
    row = {'paper': f'[{paper}]({paper}.md)'} if paper else {}
    row |= {
      'ref': c['ref'],
      'claim': c['text'] + (f' (paper: "{c["quote"]}")' if c['quote'] and not paper else ''),
      'metric': unit,
      'A': f'{c["A"]} ({c["A_setting"]}): {c["A_mean"]:.4g}',
      'B': f'{c["B"]} ({c["B_setting"]}): {c["B_mean"]:.4g}',
      'measured (95% CI)': measured,
      'paper effect': _num(c['paper_effect']),
      'p': _num(c['p'], '{:.3g}'),
      'p (BH)': _num(c.get('p_adj'), '{:.3g}'),
      'raw verdict': c['verdict_raw'],
      'verdict': f'**{c["verdict"]}**' + _edge_note(c),
      'seeds for 80% power': (
        _num(c['needed'], '{:.0f}') if c['verdict'] == scoring.INCONCLUSIVE else ''
      ),
    }
    if c.get('condition'):
      row['claim'] += f' [condition: {c["condition"]}]'
    rows.append(row)
  return pd.DataFrame(rows)


def _table(frame: pd.DataFrame) -> str:
  return frame.to_markdown(index=False, disable_numparse=True)


def _part(head: str, *body: str) -> list[str]:
  """A page part: ``head`` and each of ``body``, every one followed by a blank line."""
  return [line for text in (head, *body) for line in (text, '')]


def experiment_section(paper: spec.Paper, s: Mapping) -> list[str]:
  exp = s['exp']
  compute = _compute(s['sweeps'])
  out = _part(f'## {exp.title} ({exp.ref})', f'**Setting.** {exp.setting}')
  out += _part('**Deviations from the paper.**', '\n'.join(f'- {d}' for d in exp.deviations))
  out += _part(f'**Machine.** {compute["machine"]}; sweeps {compute["minutes"]} min in all.')
  out += _part(
    f'**Selection** on seeds {list(exp.seeds)} (validation accuracy at the last evaluation):',
    _table(s['selection']),
  )
  out += _part(
    f'**Test** on seeds {list(exp.test_seeds)} (selected settings only):', _table(s['test'])
  )
  if s['to_target'] is not None:
    out += _part(
      f'**To the target** test accuracy {s["target"]:.2f} (mean ± std over test seeds):',
      _table(s['to_target']),
    )
  if s['claims']:
    out += _part(
      '**Claims** (A - B oriented so that positive favours the claim):',
      _table(claim_rows(s['claims'])),
    )
  return out + _part(f'![{exp.key}]({paper.key}_{exp.key}.png)')


def render(paper: spec.Paper, scored: Mapping) -> str:
  """The page of ``paper`` from its scored experiments (``score_all()[paper.key]``)."""
  out = _part(
    f'# Paper {paper.number}: {paper.citation}',
    f"**The paper's setting.** {paper.setting}",
    '**Protocol.** ' + PROTOCOL,
    f'Records: `docs/results/records/{paper.key}.csv.gz` (one row per evaluation of '
    f'every run; `pandas.read_csv` reads it) and `{paper.key}.json` (the sweeps).',
  )
  for exp in paper.experiments:
    if exp.key in scored:
      out += experiment_section(paper, scored[exp.key])
  pending = [e for e in paper.experiments if e.key not in scored]
  if pending:
    previous = pathlib.Path(RESULTS, 'previous', f'{paper.key}.md')
    earlier = previous.read_text() if previous.exists() else ''
    out += _part(
      '## Not yet run as declared',
      '\n'.join(
        f'- {e.title} ({e.ref}): {_claims(e)}; `python scripts/reproduce.py '
        f'--paper={paper.key} --only={e.key}`.'
        + (
          ' Earlier 3-seed numbers (selected and scored on the same seeds, superseded): '
          f'[previous/{paper.key}.md](previous/{paper.key}.md).'
          if e.title in earlier
          else ''
        )
        for e in pending
      ),
    )
  return '\n'.join(out)


def _paper_claims(scored: Mapping[str, Mapping]) -> list[Mapping]:
  """The scored claims of the papers (not the project's own contrasts)."""
  return [
    c for exps in scored.values() for s in exps.values() for c in s['claims'] if not c['added']
  ]


def tally(scored: Mapping[str, Mapping]) -> pd.Series:
  counts = pd.Series([c['verdict'] for c in _paper_claims(scored)], dtype=object).value_counts()
  return counts.reindex([v for v in scoring.VERDICTS if v in counts.index])


def _edge_tally(scored: Mapping[str, Mapping]) -> str:
  decided = [c for c in _paper_claims(scored) if c['verdict'] in scoring.DECIDED]
  edged = sum(bool(_edge_note(c)) for c in decided)
  return (
    f'{edged} of the {len(decided)} decided verdicts go against a method selected on an edge '
    'of its grid (marked "against a grid edge" below).'
  )


def _compute(sweeps: Sequence[Mapping]) -> dict:
  """The runs, minutes and machines of an experiment's sweeps."""
  return {
    'runs': sum(m['runs'] for m in sweeps),
    'minutes': f'{sum(m["seconds"] for m in sweeps) / 60:.1f}',
    'machine': '; '.join(sorted({m['machine'] for m in sweeps})),
  }


def render_summary(scored: Mapping[str, Mapping]) -> str:
  counts = tally(scored)
  papers = [reproduction.load_paper(key) for key in reproduction.PAPERS]
  declared = sum(not c.added for p in papers for e in p.experiments for c in e.claims)
  out = _part('# Reproductions: summary', '**Protocol.** ' + PROTOCOL)
  out += _part(
    f'## Tally of the paper claims scored ({int(counts.sum())} of {declared}), after the '
    'adjustment',
    _table(counts.astype(str).rename_axis('verdict').reset_index(name='claims')),
    _edge_tally(scored),
  )
  for added, title in (
    (False, 'Paper claims'),
    (True, "The project's own contrasts (not in the tally)"),
  ):
    rows = [
      claim_rows([c for c in s['claims'] if c['added'] == added], paper=key)
      for key, exps in scored.items()
      for s in exps.values()
    ]
    rows = [r for r in rows if len(r)]
    out += _part(f'## {title}', _table(pd.concat(rows)) if rows else 'None scored yet.')
  compute = pd.DataFrame(
    {'paper': key, 'experiment': e} | _compute(s['sweeps'])
    for key, exps in scored.items()
    for e, s in exps.items()
  )
  if len(compute):
    out += _part(
      f'## Compute: {compute.minutes.astype(float).sum():.0f} minutes of sweeps for the '
      'experiments above',
      '`python scripts/reproduce.py --paper=<paper> --only=<experiment>` reruns one '
      '(selection and test sweeps; the wall time of each sweep is in its manifest, '
      '`records/<paper>.json`).',
      _table(compute),
    )
  pending = [
    f'- {p.key} {e.key}: {e.title} ({_claims(e)})'
    for p in papers
    for e in p.experiments
    if e.key not in scored[p.key]
  ]
  if pending:
    out += _part('## Experiments not yet run under this protocol', '\n'.join(pending))
  return '\n'.join(out)


def plot_experiment(paper: spec.Paper, s: Mapping, frame: pd.DataFrame, path: str) -> None:
  """Test accuracy of each selected setting over the test seeds (mean ± std)."""
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  exp = s['exp']
  fin = scoring.finals(frame)
  fig, ax = plt.subplots(figsize=(6, 4))
  for m in exp.methods:
    g = _selected_test(exp, frame, fin, m.label)[1].groupby('step').test_accuracy
    mean, std = g.mean(), g.std(ddof=1)
    ax.plot(mean.index, mean, label=m.label)
    ax.fill_between(mean.index, mean - std, mean + std, alpha=0.2)
  if s['to_target'] is not None:
    ax.axhline(s['target'], color='gray', ls='--', lw=0.8)
  ax.set(xlabel='server steps', ylabel='test accuracy', title=f'{exp.title[:60]} (test seeds)')
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


def write(
  papers: Sequence[str] = reproduction.PAPERS,
  records_dir: str = runs.RECORDS,
  out_dir: str = RESULTS,
  plots: bool = True,
) -> list[str]:
  """Rebuild every page and the summary (the adjusted p-values span all papers, so one
  paper's new records change the others' pages) and the plots of ``papers``; returns the
  paths written."""
  scored = score_all(records_dir)
  written = []
  for key in reproduction.PAPERS:
    paper = reproduction.load_paper(key)
    path = os.path.join(out_dir, f'{key}.md')
    with open(path, 'w') as f:
      f.write(render(paper, scored[key]))
    written.append(path)
    if plots and key in papers and scored[key]:
      frame, manifest = runs.read(key, records_dir)
      for exp_key, s in scored[key].items():
        png = os.path.join(out_dir, f'{key}_{exp_key}.png')
        plot_experiment(paper, s, runs.current(s['exp'], frame, manifest), png)
        written.append(png)
  path = os.path.join(out_dir, 'README.md')
  with open(path, 'w') as f:
    f.write(render_summary(scored))
  return written + [path]
