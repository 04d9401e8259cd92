"""The result pages (``docs/results/<paper>.md``, the summary ``README.md``) and their plots,
rebuilt from the committed records alone; the protocol's prose is in docs/results/protocol.md."""

from __future__ import annotations

import math
import os
import pathlib
import re
from collections.abc import Mapping, Sequence

import pandas as pd

from afl_jax import reproduction
from afl_jax.pipeline.workdir import write_text
from afl_jax.reproduction import figures, runs, scoring, spec

RESULTS = os.path.dirname(runs.RECORDS)


def _prose() -> dict[str, str]:
  """The parts of docs/results/protocol.md (``<!-- name -->`` then a paragraph), filled in."""
  text = pathlib.Path(RESULTS, 'protocol.md').read_text() + '\n'
  values = dict(alpha=scoring.ALPHA, side=scoring.ALPHA / 2, ceiling=scoring.ACCURACY_CEILING)
  values |= dict(fraction=scoring.DEFAULT_TARGET_FRACTION, bootstrap=scoring.BOOTSTRAP)
  return {k: v.format(**values) for k, v in re.findall(r'<!-- (\w+) -->\n(.*?)\n\n', text, re.S)}


def _claims(e: spec.Experiment) -> str:
  return f'{len(e.claims)} claim' + ('' if len(e.claims) == 1 else 's')


def score_paper(paper: spec.Paper, records_dir: str = runs.RECORDS) -> dict:
  """Per experiment whose test sweeps have run: selections, tables, target, raw claims
  (from the rows the records mark current; no config is resolved)."""
  everything, manifest = runs.read(paper.key, records_dir)
  out = {}
  for exp in paper.experiments:
    frame = runs.current(exp, everything, manifest)
    selection = scoring.per_run(frame[frame.phase == 'select'])
    if set(selection.method) < {m.label for m in exp.methods}:
      continue
    test = frame[frame.phase == 'test']
    tested = set(zip(test.method, test.setting))
    wanted = scoring.test_settings(exp, selection).items()
    if any((m, k) not in tested for m, keys in wanted for k in keys):
      continue
    target = scoring.target_of(exp, selection)
    table = scoring.per_run(frame, target)
    claims = [scoring.score_claim(exp, c, frame, table, target) for c in exp.claims]
    sweeps = [m for m in manifest if m['experiment'] == exp.key]
    out[exp.key] = {'exp': exp, 'target': target, 'claims': claims, 'sweeps': sweeps}
    out[exp.key] |= dict(zip(('selection', 'test', 'to_target'), _tables(exp, frame, table)))
  return out


def tallied(c: Mapping) -> bool:
  """Whether a scored claim counts in the tally: a paper statement on confirmatory seeds."""
  return not c['outside'] and not c.get('exploratory')


def score_all(records_dir: str = runs.RECORDS, papers: Sequence[spec.Paper] = ()) -> dict:
  """``papers`` (default: the bundled ones) scored, paper key -> :func:`score_paper`; the
  tallied claims adjusted together, the others apart."""
  papers = papers or [reproduction.load_paper(key) for key in reproduction.PAPERS]
  scored = {paper.key: score_paper(paper, records_dir) for paper in papers}
  every = [s['claims'] for exps in scored.values() for s in exps.values()]
  for tally in (True, False):
    family = [(cs, i) for cs in every for i, c in enumerate(cs) if tallied(c) == tally]
    for (claims, i), claim in zip(family, scoring.adjust([cs[i] for cs, i in family])):
      claims[i] = claim
  return scored


def _name(field: str) -> str:
  return field.rsplit('.', 1)[-1]


SELECTION = ['method', 'grid', 'selected (validation)', 'edge', 'val acc', 'diverged runs']
TEST = ['method', 'setting', 'seeds', 'test acc', 'diverged', 'last-quarter gain']
TARGET = ['method', 'reached', *(spec.METRICS[metric][0] for metric in scoring.TO_TARGET)]


def _tables(exp: spec.Experiment, frame: pd.DataFrame, table: pd.DataFrame) -> tuple:
  """Per method: its selection, its selected setting on the test seeds (with the last-quarter
  gain) and, where a claim is to a target, its values there."""
  selection, test, target = [], [], []
  mean_sd = lambda x, f='.3f', g='.3f': f'{x.mean():{f}} ± {x.std(ddof=1):{g}}'  # noqa: E731
  for m in exp.methods:
    s = scoring.select(table, exp.key, m.label)
    grid = [f'{_name(k)} in {list(v)}' for k, v in m.grid.items()]
    grid = '; '.join(grid + [f'no {_name(k)} axis: {why}' for k, why in m.untuned.items()])
    edge = ', '.join(s['edges']) or '—'
    edge += ' (kept)' if s['edges'] and m.label in exp.edges_kept else ''
    diverged = int(scoring.rows(table, exp.key, m.label, 'select').diverged.sum())
    short = scoring._short(s['setting'])
    grid = grid or 'one setting (nothing tuned)'
    selection.append([m.label, grid, short, edge, f'{s["val"]:.3f}', diverged])
    mine = scoring.rows(table, exp.key, m.label, 'test', s['setting'])
    curve = scoring.rows(frame, exp.key, m.label, 'test', s['setting']).groupby('step')
    curve = curve.test_accuracy.mean()
    steps = curve.index.to_numpy()
    gain = curve.iloc[-1] - curve[curve.index <= steps[-1] - (steps[-1] - steps[0]) / 4].iloc[-1]
    acc = mean_sd(mine.test_accuracy)
    test.append([m.label, short, len(mine), acc, int(mine.diverged.sum()), f'{gain:+.3f}'])
    if any(c.metric in scoring.TO_TARGET for c in exp.claims):
      to = [mean_sd(mine[q], '.4g', '.3g') for q in scoring.TO_TARGET.values()]
      target.append([m.label, f'{int(mine.reached.sum())}/{len(mine)}', *to])
  return (
    pd.DataFrame(selection, columns=SELECTION),
    pd.DataFrame(test, columns=TEST),
    pd.DataFrame(target, columns=TARGET) if target else None,
  )


def _num(x, fmt='{:.2g}') -> str:
  return '—' if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def _edge_note(c: Mapping) -> str:
  """Beside a decided verdict: the methods it goes against selected on a grid edge."""
  edges = c.get('edges_against', []) if c['verdict'] in scoring.DECIDED else []
  return f' (against a grid edge: {"; ".join(edges)})' if edges else ''


def _pts(x: float) -> str:
  return f'{100 * x:+.1f}'


def _unit(c: Mapping) -> str:
  return spec.METRICS[c['metric']][2]


def effect_text(c: Mapping) -> str:
  """The measured effect with its unit and 95% interval."""
  if c['kind'] == 'on_seeds':
    return f'{round(c["mean"] * c["n"])}/{c["n"]} seeds'
  if c.get('ratio'):
    return f'B/A {c["mean"]:.2f}x [{c["lo"]:.2f}, {c["hi"]:.2f}]'
  if c['metric'] in spec.ACCURACY_METRICS:
    return f'{_pts(c["mean"])} pts [{_pts(c["lo"])}, {_pts(c["hi"])}]'
  return f'{c["mean"]:+.4g} {_unit(c)} [{c["lo"]:+.4g}, {c["hi"]:+.4g}]'


def paper_effect_text(c: Mapping) -> str:
  """The paper's own effect in the unit of :func:`effect_text` ('—': none given)."""
  effect, to_target = c['paper_effect'], c['metric'] in scoring.TO_TARGET
  if effect is None:
    return '—'
  if c.get('incomparable'):
    return f'{effect:g}x (other units)' if to_target else '(other units)'
  if c['metric'] in spec.ACCURACY_METRICS:
    return f'{_pts(effect)} pts'
  return f'{effect:.2f}x' if to_target and c.get('ratio') else f'{effect:g} {_unit(c)}'


def _part_names(c: Mapping) -> dict[str, str]:
  """What each test of a claim tests, in words."""
  m, upper = c.get('margin'), c.get('upper')
  unit = 'pts' if c['metric'] in spec.ACCURACY_METRICS else _unit(c)
  scale = 100 if unit == 'pts' else 1
  margin = f'{m:.0%}' if c.get('relative') and m else f'{_num(m and m * scale, "{:g}")} {unit}'
  kinds = {'better': 'direction', 'equivalent': f'within ±{margin}'}
  kinds |= {'noninferior': f'loses < {margin}', 'on_seeds': 'every seed'}
  bound = ''
  if upper is not None:
    bound = f'below {upper:g}x' if c.get('ratio') else f'below {upper * scale:g} {unit}'
  return {
    scoring.STATEMENT: kinds[c['kind']],
    scoring.BEYOND: f'beyond ±{margin}',
    scoring.BOUND: bound,
    scoring.SIZE: "vs the paper's",
    scoring.CONDITION: 'condition',
  }


# The p of each verdict key; the test a verdict rests on, where it is not the statement's.
P_OF = {'verdict': 'p_adj', 'verdict_holm': 'p_holm', 'verdict_raw': 'p'}
RESTS_ON = {
  scoring.NO_CONDITION: scoring.CONDITION,
  scoring.NOT_EQUIVALENT: scoring.BEYOND,
  scoring.SMALLER: scoring.SIZE,
}


def verdict_cell(c: Mapping, key: str = 'verdict') -> str:
  """A verdict (after BH, Holm, or raw) with the p of each test it rests on."""
  names, p = _part_names(c), P_OF[key]
  parts = [part for part in c['parts'] if math.isfinite(part.get(p, math.nan))]
  ps = '; '.join(
    (f'{names[part["name"]]} ' if len(parts) > 1 else '') + f'p={_num(part[p])}' for part in parts
  )
  out = f'**{c[key]}**' + (f' ({ps})' if ps else '')
  return out + (_edge_note(c) if key == 'verdict' else '')


def _short_cell(c: Mapping, key: str = 'verdict') -> str:
  """A verdict with the p of the test it rests on (* where the notes give more)."""
  name = RESTS_ON.get(c[key], scoring.STATEMENT)
  part = next((p for p in c['parts'] if p['name'] == name), c['parts'][0])
  return f'**{c[key]}** (p={_num(part[P_OF[key]])})' + ('*' if len(c['parts']) > 1 else '')


def claim_rows(claims: Sequence[Mapping], start: int = 1) -> pd.DataFrame:
  """One short row per claim (numbered from ``start``); the rest: :func:`claim_notes`."""
  marks = (('restated', ' [restated]'), ('outside', ' *(outside the tally)*'))
  marks += (('exploratory', ' *(exploratory)*'),)
  return pd.DataFrame(
    {
      '#': i,
      'claim': c['text'] + ''.join(text for field, text in marks if c.get(field)),
      "paper's": paper_effect_text(c),
      'observed [95%]': effect_text(c),
      'BH': _short_cell(c) + _edge_note(c),
      'Holm': _short_cell(c, 'verdict_holm'),
    }
    for i, c in enumerate(claims, start)
  )


def _side(c: Mapping, side: str) -> str:
  """A method's value on the claim's metric (to a target: over the seeds that reached it)."""
  label = c[side]
  if c['kind'] == 'on_seeds':
    return label
  if c['metric'] not in scoring.TO_TARGET:
    return f'{label} {c[f"{side}_mean"]:.4g}'
  k, n = c[f'{side}_reached'], c['n']
  if k == 0:
    return f'{label} not reached (0/{n} seeds)'
  return f'{label} {c[f"{side}_reached_mean"]:.4g} {_unit(c)} ({k}/{n} seeds reached)'


def _reached_note(c: Mapping) -> str:
  """How many test seeds reached the target, where a missed target blocks the verdict."""
  if scoring.MISSED not in (c['verdict'], c['verdict_raw']):
    return ''
  return f'{c["A"]} reached it on {c["A_reached"]}/{c["n"]}, {c["B"]} on {c["B_reached"]}/{c["n"]}'


def claim_notes(claims: Sequence[Mapping], start: int = 1) -> list[str]:
  """Below a claims table: each paper passage once, then per claim what its row leaves out."""
  passages: dict[str, list[str]] = {}
  for i, c in enumerate(claims, start):
    if c['quote']:
      passages.setdefault(c['quote'], []).append(str(i))
  out = [
    f'- Paper (claim{"s" if len(numbers) > 1 else ""} {", ".join(numbers)}): "{quote}"'
    for quote, numbers in passages.items()
  ]
  for i, c in enumerate(claims, start):
    metric = spec.METRICS[c['metric']][0]
    if c.get('target') is not None:
      metric += f' (target {c["target"]:.2f})'
    if c.get('conditions'):  # the four mean accuracies across two conditions
      acc, (a0, b0), a, b = c['conditions'], c['baseline'], c['A'], c['B']
      how = 'sizes of the changes (either sign)' if c['consistency'] else 'drops'
      sides = (
        f'{a0} {acc[a0]:.3f} -> {a} {acc[a]:.3f}; {b0} {acc[b0]:.3f} -> {b} {acc[b]:.3f}; '
        f"scored: the per-seed {how}, B's minus A's"
      )
    else:
      sides = f'{_side(c, "A")}; {_side(c, "B")}'
    if c.get('equal_time'):
      metric += ' within the simulated time both runs of a pair cover'
    notes = [f'{metric}: {sides}', f'selected A: {c["A_setting"]}; B: {c["B_setting"]}']
    if c.get('condition'):
      notes.append(f'condition: {c["condition"]}')
    notes += [f"the paper's effect: {c['source']}"] * bool(c.get('source'))
    if c.get('incomparable'):
      notes.append(f"the paper's effect is not comparable: {c['incomparable'].rstrip('.')}")
    if c.get('not_comparable'):
      notes.append(
        f"the paper's effect would need more than {scoring.ACCURACY_CEILING:.0%} (B's "
        'validation accuracy plus the effect)'
      )
    if len(c['parts']) > 1:
      notes.append('BH: ' + verdict_cell(c).replace('**', ''))
      notes.append('Holm: ' + verdict_cell(c, 'verdict_holm').replace('**', ''))
    notes += [_reached_note(c)] * bool(_reached_note(c))
    if c['verdict'] == scoring.INCONCLUSIVE and math.isfinite(c['needed']):
      notes.append(f'{c["needed"]:.0f} test seeds for 80% power')
    notes += [f'outside the tally: {c["outside"]}'] * bool(c['outside'])
    if c.get('exploratory'):
      notes.append('exploratory (outside the tally): its test seeds were looked at before')
    notes += [f'restated: {c["restated"].rstrip(".")}'] * bool(c.get('restated'))
    notes.append('before adjusting: ' + verdict_cell(c, 'verdict_raw').replace('**', ''))
    out.append(f'- {i}: ' + '; '.join(notes) + '.')
  return out


def _table(frame: pd.DataFrame) -> str:
  return frame.to_markdown(index=False, disable_numparse=True)


def _compact(frame: pd.DataFrame) -> str:
  """A markdown table without column padding (each line as long as its own cells)."""
  cells = [list(frame.columns), ['---'] * frame.shape[1], *frame.astype(str).to_numpy().tolist()]
  return '\n'.join('| ' + ' | '.join(str(c).replace('|', '\\|') for c in r) + ' |' for r in cells)


def _part(head: str, *body: str) -> list[str]:
  """A page part: ``head`` and each of ``body``, every one followed by a blank line."""
  return [line for text in (head, *body) for line in (text, '')]


def _beside_rows(theirs: Sequence[Mapping], mine: Sequence[Mapping], key: str) -> pd.DataFrame:
  """Each claim of ``mine`` that ``theirs`` also scores: both effects and verdicts."""
  by_text = {c['text']: c for c in theirs}
  return pd.DataFrame(
    {
      'claim': c['text'],
      f'{key} [95%]': effect_text(by_text[c['text']]),
      f'{key} BH': _short_cell(by_text[c['text']]),
      'here [95%]': effect_text(c),
      'here BH': _short_cell(c),
    }
    for c in mine
    if c['text'] in by_text
  )


def _experiment_section(paper: spec.Paper, s: Mapping, start: int, scored: Mapping) -> list[str]:
  exp, compute = s['exp'], _compute(s['sweeps'])
  out = _part(f'## {exp.title} ({exp.ref})', f'**Setting.** {exp.setting}')
  looks = (('Second look', exp.second_look), ('Grid extended after a test look', exp.extended))
  for head, text in looks:
    out += _part(f'**{head}.** {text}') if text else []
  out += _part('**Deviations from the paper.**', '\n'.join(f'- {d}' for d in exp.deviations))
  out += _part(f'**Seeds.** {seeds_text(exp)}')
  out += _part(f'**Machine.** {compute["machine"]}; sweeps {compute["minutes"]} min in all.')
  out += _part(
    f'**Selection** on seeds {list(exp.seeds)} (validation accuracy at the last evaluation):',
    _table(s['selection']),
  )
  if exp.edges_kept:
    out += _part(
      '**Edges kept** (selected on an edge, not extended before the test runs):',
      '\n'.join(f'- {labels}: {why}' for labels, why in _kept(exp)),
    )
  out += _part(
    f'**Test** on seeds {_seeds(exp.test_seeds)} (selected settings only; last-quarter gain: '
    'the test accuracy gained over the last quarter of the run):',
    _table(s['test']),
  )
  if s['to_target'] is not None:
    out += _part(
      f'**To the target** test accuracy {s["target"]:.2f} (mean ± std over test seeds):',
      _table(s['to_target']),
    )
  if s['claims']:
    out += _part(
      '**Claims** (positive favours the claim; [terms](README.md#terms)):',
      _compact(claim_rows(s['claims'], start)),
      '\n'.join(claim_notes(s['claims'], start)),
    )
  if exp.beside and exp.beside in scored:
    out += _part(
      f'**Beside the {exp.beside} experiment** (the same statements at its scale; the tally '
      'scores the one whose claims are not outside it):',
      _compact(_beside_rows(scored[exp.beside]['claims'], s['claims'], exp.beside)),
    )
  out += _part(f'![{exp.key}]({paper.key}_{exp.key}.png)')
  if figures.mc_curve(exp):
    out += _part(f'![{exp.key} over Mc]({paper.key}_{exp.key}_mc.png)')
  return out


def seeds_text(exp: spec.Experiment) -> str:
  """The seeds of each phase, and the earlier test seeds looked at."""
  if exp.exploratory:
    how = (
      'exploratory: looked at before the grid or seeds took their present form, so its '
      'verdicts stay out of the tally'
    )
  elif exp.looked:
    how = 'confirmatory: fresh, none of them used by an earlier test of this experiment'
  else:
    how = 'confirmatory: fixed before any test run'
  looked = [s for s in exp.looked if s not in set(exp.test_seeds)]
  earlier = (
    f'; earlier test seeds looked at: {_seeds(looked)} (records superseded)' if looked else ''
  )
  return f'selection {_seeds(exp.seeds)}; test {_seeds(exp.test_seeds)} ({how}){earlier}.'


def _kept(exp: spec.Experiment) -> list[tuple[str, str]]:
  """The methods of ``exp`` kept on an edge, grouped by reason: [(labels, why)]."""
  reasons: dict[str, list[str]] = {}
  for label, why in exp.edges_kept.items():
    reasons.setdefault(why, []).append(label)
  return [(', '.join(labels), why) for why, labels in reasons.items()]


def _seeds(seeds: Sequence[int]) -> str:
  """``3-12`` for a run of consecutive seeds, else the list."""
  seeds = list(seeds)
  if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
    return f'{seeds[0]}-{seeds[-1]}'
  return str(seeds)


LOOKS = (
  ('second_look', 'fresh test seeds after a look'),
  ('extended', 'grid extended after a test look'),
)


def _looks(paper: spec.Paper, keys, full: bool = True) -> list[str]:
  """Each experiment's looks at the test seeds: one line each, or one per experiment."""
  looks = [
    (e, [(kind, getattr(e, field)) for field, kind in LOOKS if getattr(e, field)])
    for e in paper.experiments
    if e.key in keys
  ]
  if full:
    return [f'- {e.key}: {kind}: {text}' for e, kinds in looks for kind, text in kinds]
  return [f'- {e.key}: {"; ".join(kind for kind, _ in kinds)}' for e, kinds in looks if kinds]


def render(paper: spec.Paper, scored: Mapping) -> str:
  """The page of ``paper`` from its scored experiments (``score_all()[paper.key]``)."""
  here = (
    '**Here.** Fashion-MNIST with an MLP at 2-core scale: what a verdict here does and does '
    'not say about the paper is in [the summary](README.md#scale), with the '
    '[protocol](README.md#protocol) and the [terms](README.md#terms).'
    if paper.key in reproduction.PAPERS
    else '**Protocol.**\n\n' + _prose()['protocol']  # one's own declaration: no summary beside it
  )
  out = _part(
    f'# Paper {paper.number}: {paper.citation}',
    f"**The paper's setting.** {paper.setting}",
    here,
    f'Records: `docs/results/records/{paper.key}.csv.gz` (one row per evaluation of '
    f'every run; `pandas.read_csv` reads it; the rows this page scores have `status` '
    f'`current`, those of superseded sweeps `superseded`) and `{paper.key}.json` (the sweeps).',
  )
  if scored:
    looks = _looks(paper, scored, full=False)
    out += _part(
      f'![every claim of {paper.key}]({paper.key}_forest.png)',
      "Every claim's observed effect with its 95% interval, one panel per kind of "
      "measure; the colour is the BH verdict; a black diamond marks the paper's own "
      'effect, where it gives one.',
      "**Looks at the test seeds before the verdicts** (each experiment's section says "
      'what was looked at and changed): ' + ('\n\n' + '\n'.join(looks) if looks else 'none.'),
    )
  start = 1
  for exp in (e for e in paper.experiments if e.key in scored):
    out += _experiment_section(paper, scored[exp.key], start, scored)
    start += len(scored[exp.key]['claims'])
  if pending := [e for e in paper.experiments if e.key not in scored]:
    previous = pathlib.Path(RESULTS, 'previous', f'{paper.key}.md')
    earlier = previous.read_text() if previous.exists() else ''
    before = (
      ' Earlier 3-seed numbers (selected and scored on the same seeds, superseded): '
      f'[previous/{paper.key}.md](previous/{paper.key}.md).'
    )
    lines = [
      f'- {e.title} ({e.ref}): {_claims(e)}; `python scripts/reproduce.py --paper={paper.key} '
      f'--only={e.key}`.' + (before if e.title in earlier else '')
      for e in pending
    ]
    out += _part('## Not yet run as declared', '\n'.join(lines))
  return '\n'.join(out)


def _tallied(scored: Mapping[str, Mapping], tally: bool = True) -> list[Mapping]:
  """The scored claims in the tally of paper statements (``tally``), or outside it."""
  every = (c for exps in scored.values() for s in exps.values() for c in s['claims'])
  return [c for c in every if tallied(c) == tally]


def _counted(claims: Sequence[Mapping], key: str) -> pd.Series:
  return pd.Series([c[key] for c in claims], dtype=object).value_counts()


def tally_table(scored: Mapping[str, Mapping]) -> pd.DataFrame:
  """Paper statements per verdict after BH and after Holm, side by side."""
  claims = _tallied(scored)
  both = pd.concat(
    {k: _counted(claims, v) for k, v in (('BH', 'verdict'), ('Holm', 'verdict_holm'))}, axis=1
  )
  both = both.reindex([v for v in scoring.VERDICTS if v in both.index]).fillna(0).astype(int)
  return both.astype(str).rename_axis('verdict').reset_index()


def _counts(claims: Sequence[Mapping], key: str) -> str:
  """'2 agrees, 1 inconclusive': the verdicts of ``claims`` in the order of VERDICTS."""
  counts = _counted(claims, key)
  return ', '.join(f'{counts[v]} {v}' for v in scoring.VERDICTS if v in counts)


def _compute(sweeps: Sequence[Mapping]) -> dict:
  return {
    'runs': sum(m['runs'] for m in sweeps),
    'minutes': f'{sum(m["seconds"] for m in sweeps) / 60:.1f}',
    'machine': '; '.join(sorted({m['machine'] for m in sweeps})),
  }


MODELS = {
  'mlp': 'MLP 784-200-200-10',
  'cnn': 'CNN (3 conv + 2 FC)',
  'logreg': 'logistic regression',
}
DATASETS = {'fmnist': 'FMNIST'}


def _ran_at(exp: spec.Experiment) -> str:
  """The dataset, model, clients and length an experiment ran at (configs loaded only)."""
  configs = [spec.sweep_config(exp, m) for m in exp.methods]

  def values(field, names=()) -> str:
    found = sorted({c[field] for c in configs})
    lo, hi = (str(dict(names).get(v, v)) for v in (found[0], found[-1]))
    return lo if len(found) == 1 else f'{lo}-{hi}'

  return (
    f'{values("dataset", DATASETS)}, {values("model", MODELS)}, {values("num_clients")} '
    f'clients, {values("num_rounds")} server steps'
  )


def passage_rows(scored: Mapping[str, Mapping], papers: Sequence[spec.Paper]) -> pd.DataFrame:
  """One row per paper passage the tally quotes: where it ran, its statements and their
  verdicts after BH and Holm."""
  out: dict[tuple[str, str], dict] = {}
  for paper in papers:
    for exp in paper.experiments:
      claims = [c for c in scored[paper.key].get(exp.key, {}).get('claims', []) if tallied(c)]
      where = _ran_at(exp) if claims else ''
      for c in claims:
        row = out.setdefault((paper.key, c['quote']), {'refs': [], 'at': [], 'claims': []})
        row['refs'] += [c['ref']] * (c['ref'] not in row['refs'])
        row['at'] += [where] * (where not in row['at'])
        row['claims'].append(c)
  quoted = lambda text, head=8: ' '.join(text.split()[:head]) + ' ...' * (len(text.split()) > head)
  return pd.DataFrame(
    {
      'paper': f'[{key}]({key}.md)',
      'passage': '; '.join(row['refs']) + f': "{quoted(quote)}"',
      'ran at': '; '.join(row['at']),
      'statements': len(row['claims']),
      'BH': _counts(row['claims'], 'verdict'),
      'Holm': _counts(row['claims'], 'verdict_holm'),
    }
    for (key, quote), row in out.items()
  )


def render_summary(scored: Mapping[str, Mapping]) -> str:
  prose = _prose()
  papers = [reproduction.load_paper(key) for key in reproduction.PAPERS]
  claims, outside = _tallied(scored), _tallied(scored, False)
  passages = len({c['quote'] for c in claims})
  declared = sum(not c.outside for p in papers for e in p.experiments for c in e.claims)
  exploratory = [c for c in outside if c.get('exploratory') and not c['outside']]
  decided = [c for c in claims if c['verdict'] in scoring.DECIDED]
  waiting = (
    f' ({len(exploratory)} exploratory statements wait for their confirmatory test outside it).'
  )
  out = _part(
    '# Reproductions: summary',
    f"## The papers' passages: {passages}, where each ran, and their verdicts",
    'One row per passage the tally quotes (its statements, each scored once, are on its '
    "paper's page); the verdicts after the Benjamini-Hochberg (BH) and Holm adjustments.",
    _compact(passage_rows(scored, papers)),
    '<a id="scale"></a>' + prose['scale'],
    f'## Tally: {len(claims)} paper statements scored (of {declared} declared), after the '
    'adjustment',
    f'The tally holds {len(claims)} distinct statements of the papers, each scored once (a '
    'statement is one comparison a passage makes; other readings of it and this '
    f"project's own contrasts are scored outside the tally), quoting {passages} passages. "
    'Every verdict in it is confirmatory: its test seeds were fixed before any of them was '
    'looked at' + (waiting if exploratory else '.'),
    _table(tally_table(scored)),
    f'{sum(bool(_edge_note(c)) for c in decided)} of the {len(decided)} decided verdicts go '
    'against a method selected on an edge of its grid (marked "against a grid edge").',
    '## Protocol',
    prose['protocol'],
    prose['records'],
    '## Terms',
    prose['terms'],
  )
  counts = [
    (key, sum(not tallied(c) for s in exps.values() for c in s['claims']))
    for key, exps in scored.items()
  ]
  out += _part(
    "## Scored outside the tally (other readings, the project's own contrasts)",
    f"{len(outside)} claims, adjusted among themselves, each on its paper's page with the "
    'reason: ' + ', '.join(f'[{key}]({key}.md) {n}' for key, n in counts if n) + '.',
  )
  looks = [line for p in papers for line in _looks(p, scored[p.key])]
  ran = [(p, e) for p in papers for e in p.experiments if e.key in scored[p.key]]
  if looks:
    out += _part(
      '## Second looks and grids extended after a look at the test seeds',
      'Test seeds drawn again after an inconclusive result, or a grid extended after a '
      'decided verdict and the tests run again on the same seeds: either way the decision '
      'followed a look at the test data. Each such experiment then ran its test phase again '
      'on fresh test seeds, none of which an earlier test of it used, and its verdicts are '
      'scored on them alone (the seeds of each phase are on its page); one still waiting '
      'for it is exploratory, outside the tally.',
      '\n'.join(
        f'- {p.key} {e.key}: {seeds_text(e)}'
        for p, e in ran
        if e.looked or e.second_look or e.extended
      ),
      'What was looked at and changed, each time:',
      '\n'.join(looks),
    )
  if kept := [f'- {p.key} {e.key} ({labels}): {why}' for p, e in ran for labels, why in _kept(e)]:
    out += _part(
      '## Edges kept (selected on an edge of the grid, not extended before the test runs)',
      '\n'.join(kept),
    )
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


def write(
  papers: Sequence[str] = reproduction.PAPERS,
  records_dir: str = runs.RECORDS,
  out_dir: str = RESULTS,
) -> list[str]:
  """Rebuild every page and the summary, and the plots of ``papers``; the paths written."""
  scored = score_all(records_dir)
  every = texts(scored, out_dir)
  for path, text in every.items():
    write_text(path, text)  # a temporary file, renamed
  written = list(every)
  for key in (k for k in reproduction.PAPERS if k in papers and scored[k]):
    frame, manifest = runs.read(key, records_dir)
    written += figures.draw(reproduction.load_paper(key), scored[key], frame, manifest, out_dir)
  return written


def texts(scored: Mapping, out_dir: str = RESULTS) -> dict[str, str]:
  """Path -> text of every paper's page and of the summary (``scored``: :func:`score_all`)."""
  paper = lambda key: render(reproduction.load_paper(key), scored[key])  # noqa: E731
  out = {os.path.join(out_dir, f'{key}.md'): paper(key) for key in reproduction.PAPERS}
  return out | {os.path.join(out_dir, 'README.md'): render_summary(scored)}
