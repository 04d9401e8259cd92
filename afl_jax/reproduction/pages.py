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
import re
from collections.abc import Mapping, Sequence

import pandas as pd

from afl_jax import reproduction
from afl_jax.pipeline.plotting import save_figure
from afl_jax.pipeline.workdir import write_text
from afl_jax.reproduction import records, runs, scoring, spec

RESULTS = os.path.dirname(runs.RECORDS)

PROTOCOL = (
  'Every method of an experiment is tuned on the same number of grid settings (a method '
  "whose paper sets a rate by design has no axis for it and the others' values on the "
  'axes it has: fewer settings, said in its grid). '
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
  f'verdict keeps a decided raw verdict only when its adjusted p is below {scoring.ALPHA}; '
  "Holm's step-down adjustment (family-wise error) is shown beside it, with its own "
  'verdict and count. A speedup (fewer steps, seconds or MB to the target) is scored as '
  'the per-seed ratio B / A on a log scale (paired t-test of log(B / A) against the '
  "claimed factor's log) and shown as the geometric-mean ratio with its 95% interval. "
  "*not comparable*: the paper's accuracy effect would need more than "
  f'{scoring.ACCURACY_CEILING:.0%} accuracy here (B plus the effect), so no outcome could '
  'show it; the direction alone is scored. '
  'There is no effect-size floor: the interval states the size. An inconclusive claim lists the '
  'test seeds that would give 80% power at its observed effect and spread (before the '
  'adjustment). A decided verdict whose losing method was selected on an edge of its grid '
  '(the smallest or largest value tried of a swept axis, list-valued axes included) names '
  'that edge beside it: a wider grid might move it.'
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
        'grid': '; '.join(
          [f'{k.rsplit(".", 1)[-1]} in {list(v)}' for k, v in m.grid.items()]
          + [f'no {k.rsplit(".", 1)[-1]} axis: {why}' for k, why in m.untuned.items()]
        ),
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


def _pts(x: float) -> str:
  return f'{100 * x:+.1f}'


def effect_text(c: Mapping) -> str:
  """The measured effect with its unit and 95% interval: accuracy in points, a speedup as
  the ratio B / A, an event as the seeds it happened on, else the metric's unit."""
  if c['kind'] == 'on_seeds':
    return f'{round(c["mean"] * c["n"])}/{c["n"]} seeds'
  if c.get('ratio'):
    return f'B/A {c["mean"]:.2f}x [{c["lo"]:.2f}, {c["hi"]:.2f}]'
  if c['metric'] in spec.ACCURACY_METRICS:
    return f'{_pts(c["mean"])} pts [{_pts(c["lo"])}, {_pts(c["hi"])}]'
  unit = spec.UNITS[c['metric']]
  return f'{c["mean"]:+.4g} {unit} [{c["lo"]:+.4g}, {c["hi"]:+.4g}]'


def paper_effect_text(c: Mapping) -> str:
  """The paper's own effect in the same unit as :func:`effect_text` ('—': none given)."""
  effect = c['paper_effect']
  if effect is None:
    return '—'
  if c['metric'] in spec.ACCURACY_METRICS:
    return f'{_pts(effect)} pts'
  if c['metric'] in scoring.TO_TARGET and c.get('ratio'):
    return f'{effect:.2f}x'
  return f'{effect:g} {spec.UNITS[c["metric"]]}'


def _side(c: Mapping, side: str) -> str:
  """A method's value on the claim's metric, where it means something: none for an
  event claim; for a to-target metric the mean over the seeds that reached the target,
  with how many did."""
  label = f'{c[side]} ({c[f"{side}_setting"]})'
  if c['kind'] == 'on_seeds':
    return label
  if c['metric'] in scoring.TO_TARGET:
    k, n = c[f'{side}_reached'], c['n']
    if k == 0:
      return f'{label}: not reached (0/{n} seeds)'
    unit = spec.UNITS[c['metric']]
    return f'{label}: {c[f"{side}_reached_mean"]:.4g} {unit} ({k}/{n} seeds reached)'
  return f'{label}: {c[f"{side}_mean"]:.4g}'


def _reached_note(c: Mapping) -> str:
  """Beside a verdict blocked by a missed target: how many test seeds reached it."""
  if scoring.MISSED not in (c['verdict'], c['verdict_raw']):
    return ''
  return (
    f' ({c["A"]} reached it on {c["A_reached"]}/{c["n"]}, {c["B"]} on {c["B_reached"]}/{c["n"]})'
  )


def claim_rows(claims: Sequence[Mapping], paper: str | None = None) -> pd.DataFrame:
  """The claims table; with ``paper`` (the summary), a narrow one: a paper column, the
  effect, the adjusted p-values and verdicts (settings, values and quotes stay on the
  paper's page)."""
  rows = []
  for c in claims:
    unit = spec.METRICS[c['metric']][0]
    if c['kind'] == 'equivalent':
      unit += f', abs(A - B) <= {c["margin"]:g} {spec.UNITS[c["metric"]]}'
    if c.get('target') is not None:
      unit += f' (target {c["target"]:.2f})'
    text = c['text'] + (' [restated]' if c.get('restated') else '')
    if c.get('condition') and not paper:
      text += f' [condition: {c["condition"]}]'
    verdict = f'**{c["verdict"]}**' + _edge_note(c) + _reached_note(c)
    if c.get('not_comparable') and c['verdict'] != scoring.NOT_COMPARABLE:
      verdict += " (the paper's effect is not comparable here)"
    if paper:
      rows.append(
        {
          'paper': f'[{paper}]({paper}.md)',
          'ref': c['ref'],
          'claim': text,
          'effect (95% CI)': effect_text(c),
          'p (BH)': _num(c.get('p_adj'), '{:.2g}'),
          'verdict (BH)': verdict,
          'Holm': c.get('verdict_holm', ''),
        }
      )
      continue
    quote = f' (paper: "{c["quote"]}")' if c['quote'] else ''
    row = {
      'ref': c['ref'],
      'claim': text + quote,
      'metric': unit,
      'A': _side(c, 'A'),
      'B': _side(c, 'B'),
      'measured (95% CI)': effect_text(c),
      'paper effect': paper_effect_text(c),
      'p': _num(c['p'], '{:.3g}'),
      'p (BH)': _num(c.get('p_adj'), '{:.3g}'),
      'p (Holm)': _num(c.get('p_holm'), '{:.3g}'),
      'raw verdict': c['verdict_raw'],
      'verdict (BH)': verdict,
      'verdict (Holm)': c.get('verdict_holm', ''),
      'seeds for 80% power': (
        _num(c['needed'], '{:.0f}') if c['verdict'] == scoring.INCONCLUSIVE else ''
      ),
    }
    rows.append(row)
  return pd.DataFrame(rows)


def restated_rows(claims: Sequence[Mapping]) -> str:
  """Every restated claim next to the paper's passage it is scored against."""
  return '\n'.join(
    f'- **{c["ref"]}**: {c["text"]}. Paper: "{c["quote"]}" Restated: {c["restated"]}'
    for c in claims
    if c.get('restated')
  )


def _table(frame: pd.DataFrame) -> str:
  return frame.to_markdown(index=False, disable_numparse=True)


def _compact(frame: pd.DataFrame) -> str:
  """A markdown table without column padding (each line as long as its own cells)."""
  cells = [list(frame.columns), ['---'] * frame.shape[1], *frame.astype(str).to_numpy().tolist()]
  return '\n'.join('| ' + ' | '.join(str(c).replace('|', '/') for c in row) + ' |' for row in cells)


def _part(head: str, *body: str) -> list[str]:
  """A page part: ``head`` and each of ``body``, every one followed by a blank line."""
  return [line for text in (head, *body) for line in (text, '')]


def experiment_section(paper: spec.Paper, s: Mapping) -> list[str]:
  exp = s['exp']
  compute = _compute(s['sweeps'])
  out = _part(f'## {exp.title} ({exp.ref})', f'**Setting.** {exp.setting}')
  if exp.second_look:
    out += _part(f'**Second look.** {exp.second_look}')
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
      '**Claims** (A - B oriented so that positive favours the claim; accuracy in points):',
      _table(claim_rows(s['claims'])),
    )
    if restated_rows(s['claims']):
      out += _part('**Restated claims** (the paper passage each is scored against):')
      out += _part(restated_rows(s['claims']))
  out += _part(f'![{exp.key}]({paper.key}_{exp.key}.png)')
  if _mc_curve(exp):
    out += _part(f'![{exp.key} over Mc]({paper.key}_{exp.key}_mc.png)')
  return out


def render(paper: spec.Paper, scored: Mapping) -> str:
  """The page of ``paper`` from its scored experiments (``score_all()[paper.key]``)."""
  out = _part(
    f'# Paper {paper.number}: {paper.citation}',
    f"**The paper's setting.** {paper.setting}",
    '**Protocol.** ' + PROTOCOL,
    f'Records: `docs/results/records/{paper.key}.csv.gz` (one row per evaluation of '
    f'every run; `pandas.read_csv` reads it; the rows this page scores have `status` '
    f'`current`, those of superseded sweeps `superseded`) and `{paper.key}.json` (the sweeps).',
  )
  if scored:
    out += _part(
      f'![every claim of {paper.key}]({paper.key}_forest.png)',
      "Every claim's effect with its 95% interval, one panel per unit (dot colour: the "
      'verdict after the BH adjustment; a speedup on a log axis).',
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


def tally(scored: Mapping[str, Mapping], key: str = 'verdict') -> pd.Series:
  """Paper claims per verdict (``key``: 'verdict' after BH, 'verdict_holm' after Holm)."""
  counts = pd.Series([c[key] for c in _paper_claims(scored)], dtype=object).value_counts()
  return counts.reindex([v for v in scoring.VERDICTS if v in counts.index])


def tally_table(scored: Mapping[str, Mapping]) -> pd.DataFrame:
  """The verdict counts after BH and after Holm, side by side."""
  both = pd.concat({'BH': tally(scored), 'Holm': tally(scored, 'verdict_holm')}, axis=1)
  both = both.reindex([v for v in scoring.VERDICTS if v in both.index]).fillna(0).astype(int)
  return both.astype(str).rename_axis('verdict').reset_index()


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
  restated = [c for c in _paper_claims(scored) if c.get('restated')]
  looks = [
    f'- {p.key} {e.key}: {e.second_look}'
    for p in (reproduction.load_paper(k) for k in reproduction.PAPERS)
    for e in p.experiments
    if e.second_look and e.key in scored[p.key]
  ]
  papers = [reproduction.load_paper(key) for key in reproduction.PAPERS]
  declared = sum(not c.added for p in papers for e in p.experiments for c in e.claims)
  out = _part('# Reproductions: summary', '**Protocol.** ' + PROTOCOL, records.NOTE)
  out += _part(
    f'## Tally of the paper claims scored ({int(counts.sum())} of {declared}), after the '
    'adjustment',
    _table(tally_table(scored)),
    _edge_tally(scored),
  )
  if restated:
    out += _part(
      f'## Claims restated against the paper ({len(restated)})',
      restated_rows(restated),
    )
  if looks:
    out += _part(
      '## Second looks',
      'Test seeds drawn again after an inconclusive result on earlier test seeds: fresh '
      'seeds, but the decision to draw them followed a look at the data.',
      '\n'.join(looks),
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
    out += _part(f'## {title}', _compact(pd.concat(rows)) if rows else 'None scored yet.')
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


def _pyplot():
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  return plt


# The x axis of an experiment's curves: the axis of its to-target claims.
X_AXES = {
  'clock_to_target': ('wall_clock', 1.0, 'simulated seconds'),
  'mb_to_target': ('bytes_up', 1e-6, 'MB uploaded'),
}
MC_LABEL = re.compile(r'^(.*) \(Mc = (\d+)\)$')


def _x_axis(exp: spec.Experiment) -> tuple[str, float, str]:
  for c in exp.claims:
    if c.metric in X_AXES:
      return X_AXES[c.metric]
  return 'step', 1.0, 'server steps'


def plot_experiment(paper: spec.Paper, s: Mapping, frame: pd.DataFrame, path: str) -> None:
  """Test accuracy of each selected setting over the test seeds (mean ± std), against
  the axis its claims are about (server steps, simulated seconds or MB uploaded; the
  mean over seeds of that axis at each evaluation)."""
  plt = _pyplot()
  exp = s['exp']
  column, scale, xlabel = _x_axis(exp)
  fin = scoring.finals(frame)
  fig, ax = plt.subplots(figsize=(6, 4))
  for m in exp.methods:
    g = _selected_test(exp, frame, fin, m.label)[1].groupby('step')
    mean, std = g.test_accuracy.mean(), g.test_accuracy.std(ddof=1)
    x = g[column].mean().to_numpy(float) * scale
    ax.plot(x, mean, label=m.label)
    ax.fill_between(x, mean - std, mean + std, alpha=0.2)
  if s['to_target'] is not None:
    ax.axhline(s['target'], color='gray', ls='--', lw=0.8)
  ax.set(xlabel=xlabel, ylabel='test accuracy', title=f'{exp.title[:60]} (test seeds)')
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  fig.tight_layout()
  save_figure(fig, path, dpi=90)  # a temporary file, renamed


def _mc_curve(exp: spec.Experiment) -> dict[str, list[tuple[int, str]]]:
  """Method name -> [(Mc, label)] when every method of ``exp`` is one method at one
  concurrency ('X (Mc = n)', at least two values each), else {}."""
  out: dict[str, list[tuple[int, str]]] = {}
  for m in exp.methods:
    match = MC_LABEL.match(m.label)
    if not match:
      return {}
    out.setdefault(match[1], []).append((int(match[2]), m.label))
  return out if all(len(v) > 1 for v in out.values()) else {}


def plot_mc(s: Mapping, frame: pd.DataFrame, path: str) -> None:
  """Test accuracy against the concurrency Mc (mean ± std over the test seeds): the best
  evaluation of each run where the claims score the best accuracy, else the final one."""
  plt = _pyplot()
  exp = s['exp']
  best = any(c.metric == 'best_test_accuracy' for c in exp.claims)
  fin = scoring.finals(frame)
  fig, ax = plt.subplots(figsize=(6, 4))
  for name, points in _mc_curve(exp).items():
    mcs, means, stds = [], [], []
    for mc, label in sorted(points):
      if best:
        acc = _selected_test(exp, frame, fin, label)[1].groupby('seed').test_accuracy.max()
      else:
        acc = _selected_test(exp, fin, fin, label)[1].test_accuracy
      mcs.append(mc)
      means.append(acc.mean())
      stds.append(acc.std(ddof=1))
    ax.errorbar(mcs, means, yerr=stds, marker='o', capsize=3, label=name)
  ax.set(
    xlabel='Mc (clients training at once)',
    ylabel=f'{"best" if best else "final"} test accuracy',
  )
  ax.set_title(f'{exp.title[:60]} (test seeds)', fontsize=9)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  fig.tight_layout()
  save_figure(fig, path, dpi=90)  # a temporary file, renamed


VERDICT_COLOURS = {
  scoring.AGREES: 'tab:green',
  scoring.AGREES_SMALLER: 'tab:olive',
  scoring.EQUIVALENT: 'tab:green',
  scoring.SMALLER: 'tab:orange',
  scoring.DISAGREES: 'tab:red',
  scoring.NOT_EQUIVALENT: 'tab:red',
}


def forest_panels(claims: Sequence[Mapping]) -> dict[str, list[Mapping]]:
  """The claims of a forest plot by panel: 'accuracy (points)', 'speedup B / A' or the
  metric's unit (event claims have no interval and are left out)."""
  out: dict[str, list[Mapping]] = {}
  for c in claims:
    if c['kind'] == 'on_seeds' or not math.isfinite(c['lo']):
      continue
    if c.get('ratio'):
      panel = 'speedup B / A (log axis)'
    elif c['metric'] in spec.ACCURACY_METRICS:
      panel = 'accuracy difference (points)'
    else:
      panel = f'difference ({spec.UNITS[c["metric"]]})'
    out.setdefault(panel, []).append(c)
  return out


def _short_text(text: str, n: int) -> str:
  return text if len(text) <= n else text[: n - 3] + '...'


def plot_forest(paper_key: str, scored: Mapping, path: str) -> None:
  """Every claim of a paper: its effect (positive favours the claim) with its 95%
  interval, one panel per unit, coloured by the BH verdict."""
  plt = _pyplot()
  claims = [c for s in scored.values() for c in s['claims']]
  panels = forest_panels(claims)
  heights = [len(v) + 1 for v in panels.values()]
  fig, axes = plt.subplots(
    len(panels),
    1,
    figsize=(11, 0.28 * sum(heights) + 1.2),
    squeeze=False,
    gridspec_kw={'height_ratios': heights},
  )
  for ax, (panel, cs) in zip(axes[:, 0], panels.items()):
    ratio = panel.startswith('speedup')
    scale = 1.0 if ratio else 100.0 if panel.startswith('accuracy') else 1.0
    for i, c in enumerate(cs):
      y = len(cs) - i
      colour = VERDICT_COLOURS.get(c['verdict'], 'gray')
      ax.plot([c['lo'] * scale, c['hi'] * scale], [y, y], color=colour, lw=1.5)
      ax.plot(c['mean'] * scale, y, 'o', color=colour, ms=4)
      if c['kind'] == 'equivalent':  # the margin, both sides
        ax.plot([-c['margin'] * scale, c['margin'] * scale], [y, y], '|', color='black', ms=8)
      elif ratio and c['factor'] != 1.0:  # the claimed factor
        ax.plot(c['factor'], y, '|', color='black', ms=8)
    ax.axvline(1.0 if ratio else 0.0, color='black', lw=0.8)
    if ratio:
      ax.set_xscale('log')
    names = [
      _short_text(f'{c["experiment"]}: {c["text"]}', 75) + (' *' if c['added'] else '') for c in cs
    ]
    ax.set_yticks(range(len(cs), 0, -1), names, fontsize=6)
    ax.set_xlabel(panel, fontsize=8)
    ax.grid(alpha=0.3, axis='x')
  axes[0, 0].set_title(
    f'{paper_key}: every claim, effect and 95% interval (BH verdict: green agrees, red '
    'disagrees,\norange smaller than the paper, gray undecided; | the margin or the claimed '
    "factor; * the project's own)",
    fontsize=8,
  )
  fig.tight_layout()
  fig.subplots_adjust(left=0.42)  # room for the claims' names
  save_figure(fig, path, dpi=90)  # a temporary file, renamed


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
    write_text(path, render(paper, scored[key]))  # a temporary file, renamed
    written.append(path)
    if plots and key in papers and scored[key]:
      frame, manifest = runs.read(key, records_dir)
      for exp_key, s in scored[key].items():
        png = os.path.join(out_dir, f'{key}_{exp_key}.png')
        current = runs.current(s['exp'], frame, manifest)
        plot_experiment(paper, s, current, png)
        written.append(png)
        if _mc_curve(s['exp']):
          plot_mc(s, current, png.replace('.png', '_mc.png'))
          written.append(png.replace('.png', '_mc.png'))
      png = os.path.join(out_dir, f'{key}_forest.png')
      plot_forest(key, scored[key], png)
      written.append(png)
  path = os.path.join(out_dir, 'README.md')
  write_text(path, render_summary(scored))
  return written + [path]
