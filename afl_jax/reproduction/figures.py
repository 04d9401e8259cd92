"""The result pages' plots: each experiment's test-seed curves of the selected settings,
and per paper a forest plot of every claim's effect and interval coloured by its BH verdict."""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from afl_jax.pipeline.plotting import save_figure
from afl_jax.reproduction import runs, scoring, spec

MC_LABEL = re.compile(r'^(.*) \(Mc = (\d+)\)$')
GROUP = re.compile(r'^(.*) \((.*)\)$')  # 'FedBuff (mild)': the method and its condition
MAX_LINES = 5  # curves per panel before an experiment's plot is faceted
# The x axis of an experiment's curves: the axis of its to-target claims (MB on a log axis).
X_AXES = {
  'clock_to_target': ('wall_clock', 1.0, 'simulated seconds', False),
  'mb_to_target': ('bytes_up', 1e-6, 'MB uploaded (log axis)', True),
}
COLOURS = '#1a9850 #a6d96a #01665e #fdae61 #d73027 #8e0152 #8c510a #de77ae #74add1 #7f7f7f'
VERDICT_COLOURS = dict(zip(scoring.VERDICTS, COLOURS.split()))
FONT = 10


def _pyplot():
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  return plt


def facets(exp: spec.Experiment) -> list[list[str]]:
  """The methods of each panel: all, one per method with conditions, or the reference
  beside MAX_LINES - 1 others."""
  labels = [m.label for m in exp.methods]
  if len(labels) <= MAX_LINES:
    return [labels]
  groups: dict[str, list[str]] = {}
  for label in labels:
    match = GROUP.match(label)
    groups.setdefault(match[1] if match else label, []).append(label)
  if len(groups) > 1 and all(1 < len(g) <= MAX_LINES for g in groups.values()):
    return list(groups.values())
  ref, rest = labels[0], labels[1:]
  size = math.ceil(len(rest) / math.ceil(len(rest) / (MAX_LINES - 1)))
  return [[ref, *rest[i : i + size]] for i in range(0, len(rest), size)]


def _title(text: str, width: int) -> str:
  return '\n'.join(textwrap.wrap(text, width))


def _style(ax, xlabel: str, ylabel: str | None = None) -> None:
  ax.set_xlabel(xlabel, fontsize=FONT)
  if ylabel:
    ax.set_ylabel(ylabel, fontsize=FONT)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=FONT - 1)


def plot_experiment(s: Mapping, frame: pd.DataFrame, path: str) -> None:
  """Test accuracy of each selected setting (mean ± std over the test seeds) per panel."""
  exp, panels, fin = s['exp'], facets(s['exp']), scoring.per_run(frame)
  axes = (X_AXES[c.metric] for c in exp.claims if c.metric in X_AXES)
  column, scale, xlabel, log = next(axes, ('step', 1.0, 'server steps', False))
  cols = min(2, len(panels))  # two panels across keep the text readable at page width
  rows = math.ceil(len(panels) / cols)
  size = (5.2 * cols, 3.4 * rows + 0.8)
  fig, axes = _pyplot().subplots(rows, cols, figsize=size, squeeze=False, sharey=True)
  for ax, panel in zip(axes.flat, panels):
    for i, label in enumerate(panel):  # the reference C0 in each
      g = scoring.selected_test(exp, frame, fin, label)[1].groupby('step')
      mean, std = g.test_accuracy.mean(), g.test_accuracy.std(ddof=1)
      x = g[column].mean().to_numpy(float) * scale
      keep = x > 0 if log else np.ones(len(x), bool)
      ax.plot(x[keep], mean[keep], label=label, color=f'C{i}')
      ax.fill_between(x[keep], (mean - std)[keep], (mean + std)[keep], alpha=0.2, color=f'C{i}')
    if s['to_target'] is not None:
      ax.axhline(s['target'], color='gray', ls='--', lw=0.8, label=f'target {s["target"]:.2f}')
    if log:
      ax.set_xscale('log')
    ax.tick_params(labelsize=FONT - 1)
    _style(ax, xlabel)
  for ax in axes[:, 0]:
    ax.set_ylabel('test accuracy', fontsize=FONT)
  for ax in axes.flat[len(panels) :]:
    ax.axis('off')
  fig.suptitle(_title(f'{exp.title}: test seeds, mean ± std', 40 * cols), fontsize=FONT + 1)
  fig.tight_layout()
  save_figure(fig, path, dpi=100)


def mc_curve(exp: spec.Experiment) -> dict[str, list[tuple[int, str]]]:
  """Method -> [(Mc, label)] where every method is one method at several Mc, else {}."""
  out: dict[str, list[tuple[int, str]]] = {}
  for m in exp.methods:
    match = MC_LABEL.match(m.label)
    if not match:
      return {}
    out.setdefault(match[1], []).append((int(match[2]), m.label))
  return out if all(len(v) > 1 for v in out.values()) else {}


def plot_mc(s: Mapping, frame: pd.DataFrame, path: str) -> None:
  """Final (or, where the claims score it, best) test accuracy against the concurrency Mc."""
  exp, fin = s['exp'], scoring.per_run(frame)
  best = any(c.metric == 'best_test_accuracy' for c in exp.claims)
  fig, ax = _pyplot().subplots(figsize=(6, 4.2))
  for name, points in mc_curve(exp).items():
    tests = [
      scoring.selected_test(exp, frame if best else fin, fin, m)[1] for _, m in sorted(points)
    ]
    accs = [t.groupby('seed').test_accuracy.max() if best else t.test_accuracy for t in tests]
    mcs = [mc for mc, _ in sorted(points)]
    stds = [acc.std(ddof=1) for acc in accs]
    ax.errorbar(mcs, [acc.mean() for acc in accs], yerr=stds, marker='o', capsize=3, label=name)
  ax.set_title(_title(f'{exp.title}: test seeds, mean ± std', 60), fontsize=FONT)
  _style(ax, 'Mc (clients training at once)', f'{"best" if best else "final"} test accuracy')
  fig.tight_layout()
  save_figure(fig, path, dpi=100)


def family(c: Mapping) -> str:
  """The forest panel of a claim: accuracy points, a ratio B / A, another unit, or an event."""
  if c['kind'] == 'on_seeds':
    return 'event: share of the test seeds it happened on (exact 95% interval)'
  if c.get('ratio'):
    return 'ratio B / A (log axis)'
  if c['metric'] in spec.ACCURACY_METRICS:
    return 'accuracy difference (points)'
  return f'difference ({spec.METRICS[c["metric"]][2]})'


def forest_panels(claims: Sequence[Mapping]) -> dict[str, list[Mapping]]:
  out: dict[str, list[Mapping]] = {}
  for c in claims:
    out.setdefault(family(c), []).append(c)
  return out


def _marks(c: Mapping, scale: float) -> tuple[float | None, list[float]]:
  """A row's paper effect and its margin, bound or factor, in the panel's units."""
  effect, m, ratio = c['paper_effect'], c.get('margin'), c.get('ratio')
  if c['kind'] == 'on_seeds':
    return 1.0, []
  if effect is not None and not ratio:
    effect = effect * scale
  ticks = {'equivalent': [-m * scale, m * scale], 'noninferior': [-m * scale]} if m else {}
  ticks = ticks.get(c['kind'], [])
  if c.get('upper') is not None:
    ticks.append(c['upper'] if ratio else c['upper'] * scale)
  return effect, ticks + [c['factor']] * bool(ratio and c['factor'] != 1.0)


def _limits(spans: list[tuple[float, float]], ratio: bool) -> tuple[float, float]:
  """A panel's x range: every interval, or cut at max(20, 3x the 80th percentile of the
  extents) where a few far rows would flatten the rest (drawn to the edge, values written)."""
  if ratio:
    return min(min(a, b) for a, b in spans) / 1.3, max(max(a, b) for a, b in spans) * 1.3
  extents = np.array([max(abs(a), abs(b)) for a, b in spans] + [1.0])
  edge = 1.1 * min(extents.max(), max(20.0, 3 * float(np.percentile(extents, 80))))
  return -edge, edge


def _ratio_ticks(ax, lo: float, hi: float) -> None:
  """Plain tick labels on a log axis (0.5, 1, 2, 3, 5, 10, ...)."""
  from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

  ticks = [v * 10.0**e for e in range(-2, 4) for v in (1, 2, 3, 5)]
  ax.xaxis.set_major_locator(FixedLocator([t for t in ticks if lo <= t <= hi]))
  ax.xaxis.set_major_formatter(lambda v, _: f'{v:g}')
  ax.xaxis.set_minor_locator(NullLocator())
  ax.xaxis.set_minor_formatter(NullFormatter())


def _forest_row(ax, c: Mapping, y: float, lo: float, hi: float, scale: float) -> None:
  """One claim at height ``y``: interval, effect, marks and the paper's effect."""
  colour = VERDICT_COLOURS[c['verdict']]
  k = 1.0 if c.get('ratio') or c['kind'] == 'on_seeds' else scale
  a, b, mean = c['lo'] * k, c['hi'] * k, c['mean'] * k
  ax.plot([max(a, lo), min(b, hi)], [y, y], color=colour, lw=2)
  clipped = min(max(mean, lo), hi)
  marker = 'o' if clipped == mean else ('<' if mean < lo else '>')
  face = 'white' if c['outside'] else colour
  ax.plot(clipped, y, marker, color=colour, mfc=face, ms=7, mew=1.5)
  if a < lo or b > hi:  # cut by the axis: the effect and interval written inside it
    left = a < lo
    where = dict(xytext=(4 if left else -4, 7), textcoords='offset points', va='bottom')
    text = f'{mean:+.1f} [{a:+.1f}, {b:+.1f}]'
    ha = 'left' if left else 'right'
    ax.annotate(text, (lo if left else hi, y), fontsize=FONT - 1, ha=ha, color=colour, **where)
  effect, ticks = _marks(c, scale)
  for t in ticks:
    ax.plot(t, y, '|', color='black', ms=10, mew=1.2)
  if effect is not None and lo <= effect <= hi:
    ax.plot(effect, y, 'D', color='black', ms=5)
  right = dict(transform=ax.get_yaxis_transform(), fontsize=FONT - 1, va='center')
  ax.text(1.01, y, paper_effect_label(c), **right)


def plot_forest(paper_key: str, scored: Mapping, path: str, width: int = 52) -> None:
  """Every claim of a paper, one panel per :func:`family`, coloured by its BH verdict."""
  claims = [c for s in scored.values() for c in s['claims']]
  panels = forest_panels(claims)
  outside = lambda c: ' [outside the tally]' if c['outside'] else ''
  wrapped = {
    id(c): textwrap.wrap(f'{c["experiment"]}: {c["text"]}' + outside(c), width) for c in claims
  }
  heights = [sum(len(wrapped[id(c)]) + 0.7 for c in cs) + 1.6 for cs in panels.values()]
  size = (11, 0.2 * sum(heights) + 1.8)
  fig, axes = _pyplot().subplots(
    len(panels), 1, figsize=size, squeeze=False, gridspec_kw={'height_ratios': heights}
  )
  for ax, (panel, cs) in zip(axes[:, 0], panels.items()):
    ratio = panel.startswith('ratio')
    scale = 100.0 if panel.startswith('accuracy') else 1.0
    spans = []
    for c in cs:
      effect, ticks = _marks(c, scale)
      k = 1.0 if ratio or c['kind'] == 'on_seeds' else scale
      spans.append((c['lo'] * k, c['hi'] * k))
      spans += [(t, t) for t in ticks] + ([(effect, effect)] if effect is not None else [])
    lo, hi = (-0.05, 1.05) if panel.startswith('event') else _limits(spans, ratio)
    y, ys = 0.0, []
    for c in cs:
      y -= (len(wrapped[id(c)]) + 0.7) / 2
      ys.append(y)
      _forest_row(ax, c, y, lo, hi, scale)
      y -= (len(wrapped[id(c)]) + 0.7) / 2
    ax.axvline(1.0 if ratio else 0.0, color='black', lw=0.8)
    if ratio:
      ax.set_xscale('log')
      _ratio_ticks(ax, lo, hi)
    ax.set_xlim(lo, hi)
    ax.set_ylim(y - 0.3, 0.3)
    ax.set_yticks(ys, ['\n'.join(wrapped[id(c)]) for c in cs], fontsize=FONT)
    ax.set_xlabel(panel, fontsize=FONT)
    ax.tick_params(axis='x', labelsize=FONT)
    ax.grid(alpha=0.3, axis='x')
  _legend(fig, claims)
  fig.suptitle(
    f"{paper_key}: every claim's observed effect and 95% interval (positive favours the "
    "claim; right: the paper's effect)",
    fontsize=FONT + 1,
  )
  fig.tight_layout(rect=(0, 0, 0.93, 1 - 1.3 / fig.get_figheight()))
  save_figure(fig, path, dpi=100)


def paper_effect_label(c: Mapping) -> str:
  """The paper's effect as written at the right of its forest row."""
  if c['kind'] == 'on_seeds':
    return 'paper: every seed'
  effect = c['paper_effect']
  if effect is None:
    return 'paper: —'
  if c.get('ratio'):
    return f'paper: {effect:.2f}x'
  if c['metric'] in spec.ACCURACY_METRICS:
    return f'paper: {100 * effect:+.1f}'
  return f'paper: {effect:g}'


def _legend(fig, claims: Sequence[Mapping]) -> None:
  from matplotlib.lines import Line2D

  shown = [v for v in scoring.VERDICTS if any(c['verdict'] == v for c in claims)]
  handles = [Line2D([], [], color=VERDICT_COLOURS[v], marker='o', lw=2, label=v) for v in shown]
  handles += [
    Line2D([], [], color='black', marker='D', ls='', ms=5, label="the paper's effect"),
    Line2D([], [], color='black', marker='|', ls='', ms=10, label='margin, bound or factor'),
    Line2D([], [], color='gray', marker='o', mfc='white', ls='', label='outside the tally'),
    Line2D([], [], color='gray', marker='>', ls='', label='cut by the axis (values written)'),
  ]
  at = dict(loc='upper center', bbox_to_anchor=(0.5, 1 - 0.45 / fig.get_figheight()))
  title = dict(title='BH verdict (colour) and marks', title_fontsize=FONT)
  fig.legend(handles=handles, ncol=3, fontsize=FONT, frameon=False, **at, **title)


def draw(
  paper: spec.Paper, scored: Mapping, frame: pd.DataFrame, manifest, out_dir: str
) -> list[str]:
  """Every plot of ``paper``'s page; the paths written (each a temporary file, renamed)."""
  written = []
  for exp_key, s in scored.items():
    png = os.path.join(out_dir, f'{paper.key}_{exp_key}.png')
    current = runs.current(s['exp'], frame, manifest)
    plot_experiment(s, current, png)
    written.append(png)
    if mc_curve(s['exp']):
      plot_mc(s, current, png.replace('.png', '_mc.png'))
      written.append(png.replace('.png', '_mc.png'))
  png = os.path.join(out_dir, f'{paper.key}_forest.png')
  plot_forest(paper.key, scored, png)
  return written + [png]
