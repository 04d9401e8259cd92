"""The report generator of the ``scripts/reproduce_*.py`` scripts (imported as ``report``).

Runs a paper's declared sweeps (``configs/repro/<paper>.py``; a finished sweep of the
same config is reused), scores every claim over seeds, and writes the paper's page, its
plots, ``docs/results/<paper>.json`` and the summary ``docs/results/README.md``. An
experiment whose sweeps are not on this machine keeps the section and claims it was
scored with (stored in the JSON) while its declaration is unchanged, so a page can
gain an experiment without rerunning the others.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import pathlib
import platform
import time
from collections.abc import Mapping, Sequence

import jax

from afl_jax.errors import UserError
from afl_jax.pipeline import cli, plotting, tuning
from afl_jax.pipeline import config as config_lib

# The repository holding these scripts: configs are found beside them, not inside the
# installed package.
REPO = pathlib.Path(__file__).resolve().parent.parent


def machine_info() -> str:
  """One line describing where results were produced."""
  cpus = os.cpu_count()
  devices = ', '.join(sorted({d.device_kind for d in jax.devices()}))
  return (
    f'{platform.machine()} {platform.system()}, {cpus} CPU cores, JAX {jax.__version__} '
    f'on {jax.default_backend()} ({devices}), '
    f'{datetime.date.today().isoformat()}'
  )


def first_reaching(
  records: Sequence[dict], target: float, metric: str = 'test_accuracy'
) -> dict | None:
  """The first evaluation record whose ``metric`` is >= target (None if never)."""
  return next((r for r in records if r.get(metric, -1.0) >= target), None)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
  def fmt(v):
    if isinstance(v, float):
      return 'n/a' if v != v else f'{v:.4g}'
    return '—' if v is None else str(v)

  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  lines += ['| ' + ' | '.join(fmt(v) for v in row) + ' |' for row in rows]
  return '\n'.join(lines)


def _default_json() -> str:
  return config_lib.default().to_json_best_effort()


def _flat(d: dict, prefix: str = '') -> dict:
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f'{prefix}{k}.'))
    else:
      out[f'{prefix}{k}'] = v
  return out


# ---- reproductions declared in configs/repro/<paper>.py ---------------------------------
# The declaration (configs/repro/spec.py) holds every grid, seed and claim; the functions
# below run its sweeps, select on validation, and write the page and the summary.
RESULTS = REPO / 'docs' / 'results'
PAPERS = ('masfl', 'fedfa', 'fedecho', 'fedgm', 'asynfl')  # papers 000-004
PENDING = 'pending rerun (single-seed page)'
SEED_STD_RATIO = 1.0  # a verdict needs |mean difference| >= this many seed-stds


def _spec():
  return config_lib.import_beside(str(REPO / 'configs' / 'repro' / 'spec.py'), 'spec')


def load_paper(key: str):
  """The declaration ``configs/repro/<key>.py`` (its ``PAPER``) and the spec module."""
  spec = config_lib.import_beside(str(REPO / 'configs' / 'repro' / 'spec.py'), 'spec')
  module = config_lib.import_beside(str(REPO / 'configs' / 'repro' / 'spec.py'), key)
  return module.PAPER, spec


def run_sweeps(paper, out_dir: str, *, rerun: bool = False, only=(), log=print) -> dict:
  """Run every declared method sweep (finished sweeps of the same config reused).

  Returns ``{exp.key: {method label: {'records', 'curves', 'seconds', 'reused'}}}``;
  experiments declared with ``run=False`` or left out by ``only`` are absent unless a
  finished sweep of theirs exists.
  """
  from afl_jax.pipeline import sweep as sweep_lib

  spec = config_lib.import_beside(str(REPO / 'configs' / 'repro' / 'spec.py'), 'spec')
  out = {}
  for exp in paper.experiments:
    wanted = exp.run and (not only or exp.key in only)
    results = {}
    for method in exp.methods:
      config = spec.sweep_config(exp, method)
      workdir = os.path.join(out_dir, exp.key, _safe(method.label))
      declared = json.loads(config.to_json_best_effort())
      saved = _read_json(os.path.join(workdir, 'declared.json'))
      done = saved is not None and same_declared(saved.get('config'), declared)
      done = done and os.path.exists(os.path.join(workdir, 'summary.json'))
      if done and not rerun:
        log(f'[{exp.key}/{method.label}] reusing {workdir}')
        seconds, reused, machine = saved['seconds'], True, saved.get('machine', '')
      elif wanted:
        log(f'[{exp.key}/{method.label}] running {method.budget} settings x {len(exp.seeds)} seeds')
        t0 = time.time()
        sweep_lib.train_sweep(config, workdir, log=log)
        seconds, reused, machine = time.time() - t0, False, machine_info()
        with open(os.path.join(workdir, 'declared.json'), 'w') as f:
          json.dump({'config': declared, 'seconds': seconds, 'machine': machine}, f)
      else:
        continue
      summary = _read_json(os.path.join(workdir, 'summary.json'))
      records = [dict(r, method=method.label) for r in summary['runs']]
      curves = {r['name']: plotting.read_metrics(os.path.join(workdir, r['name'])) for r in records}
      results[method.label] = {
        'records': records,
        'curves': curves,
        'seconds': seconds,
        'reused': reused,
        'machine': machine,
      }
    if len(results) == len(exp.methods):
      out[exp.key] = results
  return out


def same_declared(saved: Mapping | None, declared: Mapping) -> bool:
  """Whether a finished sweep was run under ``declared``.

  Fields added to the library's default config after the sweep ran count as equal when
  ``declared`` holds their default value (a new option must not invalidate old runs
  that could not have set it); any other difference, added or removed, does not.
  """
  if saved is None:
    return False
  old, new = _flat(dict(saved)), _flat(dict(declared))
  defaults = _flat(json.loads(_default_json()))
  if isinstance(declared.get('algorithm'), str):
    hparams = config_lib.default_hparams(declared['algorithm'])
    defaults.update({f'hparams.{k}': v for k, v in hparams.items()})
  for field in set(new) - set(old):
    if field not in defaults or new[field] != defaults[field]:
      return False
  return all(field in new and new[field] == value for field, value in old.items())


def _safe(label: str) -> str:
  return ''.join(ch if ch.isalnum() or ch in '+-_.' else '_' for ch in label)


def _read_json(path: str):
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def _clean(rec: dict) -> dict:
  """A diverged run (non-finite loss or accuracy) scores 0, so it is never selected."""
  out = dict(rec)
  keys = ('val_accuracy', 'test_accuracy', 'val_loss', 'test_loss')
  if any(k in out and (out[k] is None or not math.isfinite(out[k])) for k in keys):
    out['val_accuracy'], out['test_accuracy'], out['diverged'] = 0.0, 0.0, True
  return out


def _subset(records, at: Mapping) -> list[dict]:
  return [r for r in records if all(r['hparams'].get(k) == v for k, v in at.items())]


def verdict(cmp, sels) -> str:
  """agrees / disagrees (paired p < alpha AND >= 1 seed-std apart) / inconclusive."""
  if not all(s.enough_seeds for s in sels):
    return 'inconclusive (fewer than 3 seeds)'
  if cmp.significant and cmp.ratio >= SEED_STD_RATIO:
    return 'agrees' if cmp.mean_diff > 0 else 'disagrees'
  return 'inconclusive at this scale'


def equivalence_verdict(cmp, sels, margin: float) -> str:
  """agrees: the paired difference's (1 - alpha) confidence interval lies within ±margin;
  disagrees: significant, beyond the margin and >= 1 seed-std; else inconclusive."""
  if not all(s.enough_seeds for s in sels):
    return 'inconclusive (fewer than 3 seeds)'
  lo, hi = confidence_interval(cmp)
  if -margin <= lo and hi <= margin:
    return 'agrees'
  if cmp.significant and abs(cmp.mean_diff) > margin and cmp.ratio >= SEED_STD_RATIO:
    return 'disagrees'
  return 'inconclusive at this scale'


EDGE_NOTE = ' (loser selected on a grid edge)'


def edge_qualified(v: str, cmp, a, b, higher: bool, kind: str) -> str:
  """``v`` + EDGE_NOTE when a decided claim's losing method sits on an edge of its grid.

  The loser might do better just outside its grid, so the verdict could be a tuning
  artefact; the page and the tally keep such verdicts apart.
  """
  if v == 'agrees' and kind == 'equivalent':
    return v
  if v == 'agrees':
    loser = b
  elif v == 'disagrees' and kind == 'equivalent':
    loser = a if (cmp.mean_diff < 0) == higher else b
  elif v == 'disagrees':
    loser = a
  else:
    return v
  return v + EDGE_NOTE if loser.edges else v


def confidence_interval(cmp) -> tuple[float, float]:
  """The two-sided (1 - alpha) t interval of the mean paired difference."""
  from scipy import stats

  half = stats.t.ppf(1 - cmp.alpha / 2, cmp.n - 1) * cmp.diff_std / math.sqrt(cmp.n)
  return cmp.mean_diff - half, cmp.mean_diff + half


# metric -> (field of a metrics record, scale to the page's unit)
TO_TARGET = {
  'steps_to_target': ('step', 1.0),
  'clock_to_target': ('wall_clock', 1.0),
  'mb_to_target': ('bytes_up', 1e-6),
}
DEFAULT_TARGET_FRACTION = 0.9


def default_target(test_means: Sequence[float]) -> float:
  """90% of the median over methods of the selected settings' mean final test accuracy,
  rounded down to a whole percent (methods that diverged, mean 0, are left out)."""
  import numpy as np

  means = [m for m in test_means if math.isfinite(m) and m > 0]
  if not means:
    return 1.0
  return math.floor(100 * DEFAULT_TARGET_FRACTION * float(np.median(means))) / 100


def to_target(curve: Sequence[dict], target: float) -> dict:
  """Per metric of :data:`TO_TARGET`: (value, reached) at the first evaluation whose test
  accuracy is >= target; not reached: (value at the last evaluation, False), a lower bound
  (None where the curve lacks the field, e.g. bytes in sweeps run before they were
  recorded)."""
  evals = [r for r in curve if 'test_accuracy' in r]
  hit = first_reaching(evals, target)
  rec = hit if hit is not None else (evals[-1] if evals else {})
  out = {}
  for metric, (field, scale) in TO_TARGET.items():
    value = rec.get(field)
    out[metric] = (None if value is None else float(value) * scale, hit is not None)
  return out


def _seed_curves(results: Mapping, label: str, hparams: Mapping) -> dict[int, list]:
  """seed -> metrics records of ``label``'s runs at ``hparams`` ([] when not stored)."""
  curves = results[label].get('curves', {})
  return {
    r['seed']: curves.get(r['name'], [])
    for r in results[label]['records']
    if r['hparams'] == dict(hparams)
  }


def target_table(exp, results: Mapping, sels: Mapping, target: float) -> list[dict]:
  """Per method (selected setting): mean ± std over the seeds that reached ``target`` of
  each :data:`TO_TARGET` metric, and how many seeds never reached it."""
  import numpy as np

  rows = []
  for m in exp.methods:
    per_seed = {
      seed: to_target(curve, target)
      for seed, curve in _seed_curves(results, m.label, sels[m.label].hparams).items()
    }
    reached = [v for v in per_seed.values() if v['steps_to_target'][1]]
    row = {'method': m.label, 'seeds': len(per_seed), 'not_reached': len(per_seed) - len(reached)}
    for metric in TO_TARGET:
      vals = [v[metric][0] for v in reached]
      if not vals or any(x is None for x in vals):
        row[metric] = None
      else:
        std = float(np.std(vals, ddof=1)) if len(vals) > 1 else math.nan
        row[metric] = (float(np.mean(vals)), std)
    rows.append(row)
  return rows


def _pm(mean: float, std: float) -> str:
  return f'{mean:.3f} ± {std:.3f}'


def _hp(hparams: Mapping) -> str:
  return (
    ', '.join(
      f'{k.rsplit(".", 1)[-1]}={v:g}' if isinstance(v, float) else f'{k.rsplit(".", 1)[-1]}={v}'
      for k, v in hparams.items()
    )
    or '—'
  )


def score(exp, results: Mapping, *, alpha: float = tuning.DEFAULT_ALPHA) -> dict:
  """Selections, the per-axis table and the claims' verdicts of one experiment's sweeps."""
  records = [_clean(r) for m in exp.methods for r in results[m.label]['records']]
  tuning.check_budgets(records)
  sels = {m.label: tuning.select(records, m.label) for m in exp.methods}
  selected = []
  for m in exp.methods:
    s = sels[m.label]
    selected.append(
      {
        'method': m.label,
        'fixed': _hp(m.fixed),
        'grid': '; '.join(f'{k.rsplit(".", 1)[-1]} in {list(v)}' for k, v in m.grid.items()),
        'budget': m.budget,
        'selected': _hp(s.hparams),
        'edges': ', '.join(f'{k.rsplit(".", 1)[-1]} on {v} edge' for k, v in s.edges.items()),
        'val': s.score,
        'test_mean': s.test_mean,
        'test_std': s.test_std,
        'seeds': list(s.seeds),
        'diverged': sum(bool(r.get('diverged')) for r in records if r['method'] == m.label),
        'minutes': results[m.label]['seconds'] / 60,
      }
    )
  axis = {}
  if exp.axis:
    values = sorted({v for m in exp.methods for v in m.grid.get(exp.axis, ())})
    for m in exp.methods:
      row = {}
      for v in values:
        sub = _subset([r for r in records if r['method'] == m.label], {exp.axis: v})
        if sub:
          s = tuning.select(sub, m.label)
          row[v] = (s.test_mean, s.test_std)
      axis[m.label] = row
  target = exp.target or default_target([sels[m.label].test_mean for m in exp.methods])
  claims = [score_claim(exp, claim, records, results, target, alpha) for claim in exp.claims]
  return {
    'selected': selected,
    'axis': axis,
    'claims': claims,
    'target': target,
    'target_declared': exp.target is not None,
    'to_target': target_table(exp, results, sels, target),
  }


def _on_metric(sel, results: Mapping, metric: str, target: float, factor: float = 1.0):
  """``sel`` with its per-seed test scores replaced by ``metric`` (times ``factor``);
  and the seeds that did not reach the target (their value: a lower bound). None when a
  seed's curve lacks the metric."""
  import dataclasses

  import numpy as np

  if metric == 'test_accuracy':
    return sel, ()
  curves = _seed_curves(results, sel.method, sel.hparams)
  values, missed = [], []
  for seed in sel.seeds:
    value, reached = to_target(curves.get(seed, []), target)[metric]
    if value is None:
      return None, ()
    values.append(factor * value)
    if not reached:
      missed.append(seed)
  std = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
  sel = dataclasses.replace(sel, test=tuple(values), test_mean=float(np.mean(values)), test_std=std)
  return sel, tuple(missed)


def _drop(sel, reference):
  """``sel`` with its per-seed test scores replaced by ``reference``'s minus its own."""
  import dataclasses

  import numpy as np

  ref = dict(zip(reference.seeds, reference.test))
  values = [ref[seed] - v for seed, v in zip(sel.seeds, sel.test)]
  std = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
  return dataclasses.replace(
    sel, test=tuple(values), test_mean=float(np.mean(values)), test_std=std
  )


def score_claim(exp, claim, records, results, target, alpha) -> dict:
  """One claim's measurement and verdict (the rules are PROTOCOL's)."""
  sub = _subset(records, claim.at)
  a0, b0 = tuning.select(sub, claim.better), tuning.select(sub, claim.worse)
  name, higher = _spec().METRICS[claim.metric]
  a, missed_a = _on_metric(a0, results, claim.metric, target, claim.factor)
  b, missed_b = _on_metric(b0, results, claim.metric, target)
  if claim.baseline:  # sensitivity: the smaller drop from the reference condition wins
    a = _drop(a, tuning.select(sub, claim.baseline[0]))
    b = _drop(b, tuning.select(sub, claim.baseline[1]))
    higher = False
  out = {
    'experiment': exp.key,
    'ref': claim.ref,
    'text': claim.text,
    'at': _hp(claim.at) if claim.at else '',
    'metric': claim.metric,
    'kind': claim.kind,
    'margin': claim.margin,
    'factor': claim.factor,
    'target': target if claim.metric in TO_TARGET else None,
    'baseline': list(claim.baseline),
  }
  if a is None or b is None:
    return out | {
      'better': '—',
      'worse': '—',
      'diff': '—',
      'p': math.nan,
      'ratio': math.nan,
      'verdict': 'not measurable (the sweep did not record this metric)',
    }
  cmp = tuning.compare(a, b, alpha=alpha)
  if claim.kind == 'equivalent':
    v = equivalence_verdict(cmp, (a, b), claim.margin)
    if (missed_a or missed_b) and v != 'inconclusive (fewer than 3 seeds)':
      v = 'inconclusive: target not reached on some seeds'
  else:
    v = verdict(cmp, (a, b))
    if not higher and v in ('agrees', 'disagrees'):
      v = 'disagrees' if v == 'agrees' else 'agrees'  # lower is better: A - B < 0 agrees
    # A value of a seed that never reached the target is a lower bound: it can only
    # flatter A when A missed (no 'agrees'), flatter B when B missed (no 'disagrees').
    if (v == 'agrees' and missed_a) or (v == 'disagrees' and missed_b):
      v = 'inconclusive: target not reached on some seeds'
  v = edge_qualified(v, cmp, a0, b0, higher, claim.kind)
  lo, hi = confidence_interval(cmp)

  def show(sel, missed, factor=1.0):
    text = _pm(sel.test_mean / factor, sel.test_std / factor)
    if claim.metric in TO_TARGET:
      text += f' ({len(sel.seeds) - len(missed)}/{len(sel.seeds)} reached)'
    return text

  return out | {
    'better': show(a, missed_a, claim.factor),
    'worse': show(b, missed_b),
    'diff': _pm(cmp.mean_diff, cmp.diff_std),
    'ci': [lo, hi],
    'p': cmp.p_value,
    'ratio': cmp.ratio,
    'verdict': v,
  }


def _curves(exp, results, sel_rows) -> dict[str, tuple]:
  """Per method: steps, mean and std over seeds of test accuracy of the selected setting,
  and the mean MB uploaded at those steps (None where the sweep recorded no bytes)."""
  import numpy as np

  out = {}
  for m, row in zip(exp.methods, sel_rows):
    recs = results[m.label]['records']
    chosen = [r for r in recs if _hp(r['hparams']) == row['selected']]
    series = [
      [x for x in results[m.label]['curves'][r['name']] if 'test_accuracy' in x] for r in chosen
    ]
    n = min(len(s) for s in series)
    steps = [x['step'] for x in series[0][:n]]
    acc = np.array([[x['test_accuracy'] for x in s[:n]] for s in series])
    mb = None
    if all('bytes_up' in x for s in series for x in s[:n]):
      mb = np.array([[x['bytes_up'] / 1e6 for x in s[:n]] for s in series]).mean(0)
    out[m.label] = (steps, acc.mean(0), acc.std(0, ddof=1), mb)
  return out


def plot_experiment(exp, results, scored, path: str) -> None:
  """Test accuracy of each selected setting (mean ± std over seeds); and along the axis."""
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  curves = _curves(exp, results, scored['selected'])
  with_mb = all(c[3] is not None for c in curves.values())
  panels = 1 + bool(scored['axis']) + with_mb
  fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), squeeze=False)
  ax = axes[0][0]
  for label, (steps, mean, std, _) in curves.items():
    ax.plot(steps, mean, marker='.', label=label)
    ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
  ax.set(xlabel='server steps', ylabel='test accuracy', title='selected settings')
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  if with_mb:
    ax = axes[0][1]
    for label, (_, mean, _, mb) in curves.items():
      ax.plot(mb[1:], mean[1:], marker='.', label=label)
    if 'target' in scored:
      ax.axhline(scored['target'], color='gray', ls='--', lw=0.8)
    ax.set_xscale('log')
    ax.set(xlabel='MB uploaded (mean over seeds, log)', ylabel='test accuracy')
    ax.set_title('selected settings vs upload (dashed: target)')
    ax.grid(alpha=0.3, which='both')
  if scored['axis']:
    ax = axes[0][-1]
    for label, row in scored['axis'].items():
      xs = sorted(row)
      ax.errorbar(
        xs,
        [row[x][0] for x in xs],
        yerr=[row[x][1] for x in xs],
        marker='o',
        capsize=3,
        label=label,
      )
    xs = [x for row in scored['axis'].values() for x in row]
    if min(xs) > 0 and max(xs) / min(xs) >= 10:
      ax.set_xscale('log')
    ax.set(xlabel=exp.axis, ylabel='test accuracy', title='best on validation per value')
    ax.grid(alpha=0.3)
  fig.suptitle(f'{exp.title} (mean ± std over {len(exp.seeds)} seeds)', fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


PROTOCOL = (
  'Every method of an experiment is tuned on the same number of grid settings, each run '
  'with the same seeds (the seed varies the data split, the schedule and the initial '
  "model). A method's setting is selected by the mean over seeds of its final "
  '**validation** accuracy (a split held out of the training data); the tables report the '
  'final **test** accuracy of that setting as mean ± std over seeds. A selection on the '
  'smallest or largest value of a swept axis is flagged (the optimum may lie outside the '
  'grid). A claim "A beats B" is tested by a paired t-test over seeds on the selected '
  'settings: **agrees** / **disagrees** only when p < {alpha} *and* the mean difference is '
  'at least {ratio:g} seed-std (the larger std of the two methods); otherwise '
  '**inconclusive at this scale**. A run that diverged scores 0. A claim may be on another '
  'metric of the selected settings: server steps, simulated seconds or MB uploaded until '
  'the test accuracy first reaches the experiment\'s target (lower is better; "A needs f '
  'times less" compares f A with B). A seed that never reaches the target counts with its '
  'value at the last evaluation, a lower bound, so the claim cannot **agree** when A missed '
  'on a seed, nor **disagree** when B did (**inconclusive: target not reached on some '
  'seeds**). A claim "A matches B within m" **agrees** when the {ci:g}% confidence interval '
  'of the paired difference lies within ±m, **disagrees** when the difference is '
  'significant, beyond m and at least {ratio:g} seed-std, and is inconclusive otherwise (and '
  'whenever a seed of either missed the target). A decided verdict whose losing method was '
  'selected on an edge of its grid says so ("loser selected on a grid edge"): that method '
  'might do better outside its grid.'
)


def experiment_section(exp, s: Mapping, plot: str, machine: str, minutes: float) -> list[str]:
  """The markdown lines of one scored experiment: heading, setting, machine, tables, plot."""
  parts = [f'## {exp.title} ({exp.ref})', '', f'**Setting.** {exp.setting}', '']
  parts += ['**Deviations from the paper.**', ''] + [f'- {d}' for d in exp.deviations] + ['']
  parts += [f'**Machine.** {machine}; sweeps {minutes:.1f} min.', '']
  parts += [
    f'**Seeds** {list(exp.seeds)}. **Grids and selections** (test accuracy at the last '
    'evaluation):',
    '',
    markdown_table(
      [
        'method',
        'fixed',
        'grid',
        'budget',
        'selected (on validation)',
        'edge flags',
        'val acc (mean)',
        'test acc (mean ± std)',
        'diverged runs (all settings)',
        'sweep min',
      ],
      [
        [
          r['method'],
          r['fixed'],
          r['grid'],
          r['budget'],
          r['selected'],
          r['edges'] or 'none',
          f'{r["val"]:.3f}',
          _pm(r['test_mean'], r['test_std']),
          r['diverged'],
          f'{r["minutes"]:.1f}',
        ]
        for r in s['selected']
      ],
    ),
    '',
  ]
  if s['axis']:
    values = sorted({v for row in s['axis'].values() for v in row})
    name = exp.axis.rsplit('.', 1)[-1]
    parts += [
      f'**Test accuracy along {name}** (per value, the other axes selected on validation; '
      "mean ± std over seeds; — = not in that method's grid):",
      '',
      markdown_table(
        ['method'] + [f'{name} = {v:g}' for v in values],
        [
          [label] + [_pm(*row[v]) if v in row else None for v in values]
          for label, row in s['axis'].items()
        ],
      ),
      '',
    ]
  parts += target_section(s) + [
    '**Claims** (A - B = paired difference over seeds, mean ± std, with its '
    f'{100 * (1 - tuning.DEFAULT_ALPHA):g}% confidence interval; metric as named; a '
    'to-target value of a seed that never reached the target is its value at the last '
    'evaluation, marked by the reached count; for a claim "f A < B" the difference is '
    'f A - B):',
    '',
    markdown_table(
      [
        'ref',
        'claim',
        'restricted to',
        'metric (test)',
        'A',
        'B',
        'A - B',
        'CI',
        'p',
        'seed-stds apart',
        'verdict',
      ],
      [
        [
          c['ref'],
          c['text'],
          c['at'] or '—',
          _claim_metric(c),
          c['better'],
          c['worse'],
          c['diff'],
          '—' if 'ci' not in c else f'[{c["ci"][0]:.3g}, {c["ci"][1]:.3g}]',
          f'{c["p"]:.3f}',
          f'{c["ratio"]:.2f}',
          f'**{c["verdict"]}**',
        ]
        for c in s['claims']
      ],
    ),
    '',
    f'![]({plot})',
    '',
  ]
  return parts


def _sweep_machine(results_exp: Mapping) -> str:
  """The machine(s) an experiment's sweeps ran on (from their declared.json)."""
  return '; '.join(sorted({r.get('machine') or 'unknown' for r in results_exp.values()}))


def render_page(
  paper,
  scored: Mapping,
  results: Mapping,
  *,
  command: str,
  machine: str,
  wall_s: float,
  plots: Mapping[str, str],
  old_page: str | None,
  kept: Mapping[str, Mapping] | None = None,
) -> str:
  """The markdown page of a declared reproduction.

  ``kept``: experiments not scored now whose stored sections stand (:func:`stored_sections`).
  """
  kept = kept or {}
  minutes = sum(r['seconds'] for ex in results.values() for r in ex.values()) / 60
  minutes += sum(k['minutes'] for key, k in kept.items() if key not in scored)
  parts = [
    f'# Paper {paper.number}, reproduction over seeds: {paper.citation}',
    '',
    f'Generated by `{command}` on {machine}. Sweeps: {minutes:.1f} min of compute in total '
    f'(finished sweeps are reused; this invocation took {wall_s / 60:.1f} min; each '
    'experiment names the machine its sweeps ran on). Declaration: '
    f'[`configs/repro/{paper.key}.py`](../../configs/repro/{paper.key}.py).',
    '',
    f"**The paper's setting.** {paper.setting}",
    '',
    '**Protocol.** '
    + PROTOCOL.format(
      alpha=tuning.DEFAULT_ALPHA, ratio=SEED_STD_RATIO, ci=100 * (1 - tuning.DEFAULT_ALPHA)
    ),
    '',
  ]
  for exp in paper.experiments:
    if exp.key in scored:
      ex = results[exp.key]
      parts += experiment_section(
        exp,
        scored[exp.key],
        plots[exp.key],
        _sweep_machine(ex),
        sum(r['seconds'] for r in ex.values()) / 60,
      )
    elif exp.key in kept:
      parts += kept[exp.key]['markdown'].rstrip('\n').split('\n') + ['']
    else:
      parts += [f'## {exp.title} ({exp.ref})', '', f'**Setting.** {exp.setting}', '']
      parts += ['**Deviations from the paper.**', ''] + [f'- {d}' for d in exp.deviations]
      parts += ['', '*Declared, not run yet* (`--only` or `run=False`): no results.', '']
  if paper.pending:
    link = f' ([single-seed page]({old_page}))' if old_page else ''
    parts += ['## Not yet rerun with seeds', '']
    parts += [
      f'- {ref}: {text} — pending rerun (single-seed page){link}.' for ref, text in paper.pending
    ]
    parts.append('')
  parts += [
    '## Exact sweep configs',
    '',
    'Differences from `afl_jax/pipeline/config.py:'
    "default()` of each method's sweep (`config.sweep` included):",
    '',
  ]
  for exp in paper.experiments:
    parts += config_lines(exp)
  return '\n'.join(parts) + '\n'


def config_lines(exp) -> list[str]:
  """The 'Exact sweep configs' lines of ``exp``'s methods: each sweep config's differences
  from the default config (the page's record of what ran)."""
  spec = _spec()
  base = _flat(json.loads(_default_json()))
  lines = []
  for m in exp.methods:
    flat = _flat(json.loads(spec.sweep_config(exp, m).to_json_best_effort()))
    diff = {k: v for k, v in flat.items() if base.get(k) != v}
    lines.append(f'- `{exp.key}/{m.label}`: `{json.dumps(diff, sort_keys=True)}`')
  return lines


def stored_sections(paper) -> dict[str, dict]:
  """The experiments of ``paper`` scored earlier, as committed, that still stand.

  ``{exp.key: {'markdown', 'claims', 'minutes', 'machine', 'configs'}}`` from
  ``docs/results/<key>.json``'s 'experiments' (:func:`stored_entry`); an entry stands
  only while its experiment's exact sweep configs are the declared ones.
  """
  stored = (_read_json(str(RESULTS / f'{paper.key}.json')) or {}).get('experiments') or {}
  keys = {exp.key: exp for exp in paper.experiments}
  return {k: v for k, v in stored.items() if k in keys and v['configs'] == config_lines(keys[k])}


def stored_entry(exp, scored: Mapping, results_exp: Mapping, plot: str) -> dict:
  """What ``docs/results/<key>.json`` keeps of a freshly scored experiment."""
  machine = _sweep_machine(results_exp)
  minutes = sum(r['seconds'] for r in results_exp.values()) / 60
  section = experiment_section(exp, scored, plot, machine, minutes)
  return {
    'markdown': '\n'.join(section) + '\n',
    'claims': scored['claims'],
    'minutes': minutes,
    'machine': machine,
    'configs': config_lines(exp),
  }


def _claim_metric(c: Mapping) -> str:
  """How a scored claim is measured, e.g. 'MB uploaded to target 75%, 10 A < B'."""
  name, higher = _spec().METRICS[c.get('metric', 'test_accuracy')]
  if c.get('baseline'):
    a0, b0 = c['baseline']
    return f'drop in {name} from A0 = {a0} / B0 = {b0} (A0 - A vs B0 - B), A < B'
  if c.get('target') is not None:
    name += f' {100 * c["target"]:g}%'
  if c.get('kind') == 'equivalent':
    return f'{name}, abs(A - B) <= {c["margin"]:g}'
  factor = c.get('factor', 1.0)
  a = f'{factor:g} A' if factor != 1.0 else 'A'
  return f'{name}, {a} {">" if higher else "<"} B'


def target_section(s: Mapping) -> list[str]:
  """The time/upload-to-target table of a scored experiment (markdown lines)."""
  how = (
    'declared for this experiment'
    if s['target_declared']
    else f'default: {100 * DEFAULT_TARGET_FRACTION:g}% of the median over methods of the '
    'selected mean final test accuracy, rounded down'
  )

  def num(x: float) -> str:
    return f'{x:.0f}' if abs(x) >= 100 else f'{x:.3g}'

  def cell(v):
    return '—' if v is None else (f'{num(v[0])} ± {num(v[1])}' if v[1] == v[1] else num(v[0]))

  return [
    f'**Time and upload to {100 * s["target"]:g}% test accuracy** ({how}; per selected '
    'setting, mean ± std over the seeds that reached it, at evaluation resolution; — = no '
    'seed reached it, or the sweep recorded no bytes):',
    '',
    markdown_table(
      ['method', 'server steps', 'simulated seconds', 'MB uploaded', 'seeds never reaching it'],
      [
        [
          r['method'],
          cell(r['steps_to_target']),
          cell(r['clock_to_target']),
          cell(r['mb_to_target']),
          f'{r["not_reached"]}/{r["seeds"]}',
        ]
        for r in s['to_target']
      ],
    ),
    '',
  ]


def main(key: str, out_dir: str, *, rerun: bool = False, only=()) -> None:
  """``scripts/reproduce_<key>.py``: :func:`reproduce`, a user error as one line."""
  try:
    reproduce(key, out_dir, rerun=rerun, only=only)
  except UserError as e:
    cli.exit_error(e)


def reproduce(key: str, out_dir: str, *, rerun: bool = False, only=(), log=print) -> str:
  """Run a paper's declared sweeps and write ``docs/results/<key>.md`` (+ plots, json)."""
  t0 = time.time()
  paper, spec = load_paper(key)
  spec.check(paper)
  unknown = sorted(set(only) - {exp.key for exp in paper.experiments})
  if unknown:
    raise UserError(
      f'--only={",".join(only)} is invalid: {", ".join(unknown)} not among the experiments '
      f'of {key}: {", ".join(exp.key for exp in paper.experiments)}'
    )
  results = run_sweeps(paper, out_dir, rerun=rerun, only=only, log=log)
  scored = {
    k: score(next(e for e in paper.experiments if e.key == k), v) for k, v in results.items()
  }
  plots = {}
  for exp in paper.experiments:
    if exp.key in scored:
      plots[exp.key] = f'{key}_{exp.key}.png'
      plot_experiment(exp, results[exp.key], scored[exp.key], str(RESULTS / plots[exp.key]))
  old = old_page(key)
  kept = stored_sections(paper)
  command = f'python scripts/reproduce_{key}.py'
  page = render_page(
    paper,
    scored,
    results,
    command=command,
    machine=machine_info(),
    wall_s=time.time() - t0,
    plots=plots,
    old_page=old,
    kept=kept,
  )
  path = RESULTS / f'{key}.md'
  with open(path, 'w') as f:
    f.write(page)
  experiments = {}
  for exp in paper.experiments:
    if exp.key in scored:
      experiments[exp.key] = stored_entry(exp, scored[exp.key], results[exp.key], plots[exp.key])
    elif exp.key in kept:
      experiments[exp.key] = kept[exp.key]
  claims = [c for e in experiments.values() for c in e['claims']]
  minutes = sum(e['minutes'] for e in experiments.values())
  with open(RESULTS / f'{key}.json', 'w') as f:
    json.dump(
      {'claims': claims, 'minutes': minutes, 'command': command, 'experiments': experiments},
      f,
      indent=1,
    )
  write_summary()
  log(f'wrote {path} in {time.time() - t0:.0f}s')
  return str(path)


def old_page(key: str) -> str | None:
  """The single-seed page of ``key`` (moved aside to ``<key>_single_seed.md`` once)."""
  single = RESULTS / f'{key}_single_seed.md'
  page = RESULTS / f'{key}.md'
  if not single.exists() and page.exists() and 'reproduction over seeds' not in page.read_text():
    page.rename(single)
  return single.name if single.exists() else (page.name if page.exists() else None)


def _single_seed_page(key: str) -> str | None:
  for name in (f'{key}_single_seed.md', f'{key}.md'):
    if (RESULTS / name).exists():
      return name
  return None


def summary_rows(papers, scored_claims: Mapping[str, Sequence[dict] | None]) -> list[list]:
  """One row per headline claim: paper, ref, claim, measured, verdict, page, command."""
  rows = []
  for paper in papers:
    command = f'`python scripts/reproduce_{paper.key}.py`'
    claims = scored_claims.get(paper.key) or []
    done = {c['experiment'] for c in claims}
    page = f'[{paper.key}.md]({paper.key}.md)'
    for c in claims:
      text = c['text'] + (f' ({c["at"]})' if c['at'] else '')
      measured = f'A {c["better"]}, B {c["worse"]}, A - B {c["diff"]} (p={c["p"]:.3f})'
      if c.get('metric', 'test_accuracy') != 'test_accuracy' or c.get('kind') == 'equivalent':
        measured = f'{_claim_metric(c)}: {measured}'
      rows.append([paper.number, c['ref'], text, measured, f'**{c["verdict"]}**', page, command])
    old = _single_seed_page(paper.key)
    old_link = f'[{old}]({old})' if old else '—'
    pending = [
      (c.ref, c.text + (f' ({_hp(c.at)})' if c.at else ''), e.run)
      for e in paper.experiments
      if e.key not in done
      for c in e.claims
    ]
    pending += [(ref, text, True) for ref, text in paper.pending]
    for ref, text, declared_to_run in pending:
      verdict = PENDING if declared_to_run else PENDING + ', declared, not run yet'
      rows.append([paper.number, ref, text, '—', verdict, old_link, command])
  return rows


def write_summary(path: str | None = None) -> str:
  """``docs/results/README.md``: every headline claim of the five papers, scored."""
  papers, scored = [], {}
  for key in PAPERS:
    if not (REPO / 'configs' / 'repro' / f'{key}.py').exists():
      continue
    paper, _ = load_paper(key)
    papers.append(paper)
    data = _read_json(str(RESULTS / f'{key}.json'))
    scored[key] = data['claims'] if data else None
  rows = summary_rows(papers, scored)
  counts = {}
  for row in rows:
    v = row[4].strip('*')
    counts[v] = counts.get(v, 0) + 1
  text = '\n'.join(
    [
      '# Results: every headline claim of the five papers, scored',
      '',
      'Generated by `python scripts/report.py` (and at the end of every '
      '`scripts/reproduce_<paper>.py`) from the declarations in `configs/repro/` and the '
      'scored sweeps in `docs/results/<paper>.json`.',
      '',
      'A verdict is **agrees** / **disagrees** only when the paired difference over at least 3 '
      f'seeds has p < {tuning.DEFAULT_ALPHA} and is at least {SEED_STD_RATIO:g} seed-std; '
      'otherwise **inconclusive at this scale**. Every method is tuned on the validation split '
      'with the same grid budget; each page gives the seeds, grids, selected settings (with '
      'edge flags), deviations from the paper, machine and wall time. Measured = test '
      'accuracy of the validation-selected setting, mean ± std over seeds (A = the method the '
      'paper says is better), unless the claim names another metric (steps / simulated '
      'seconds / MB uploaded to a target accuracy, lower is better; a seed that never reaches '
      'the target blocks a verdict in its favour) or is an equivalence "A matches B within m" '
      '(agrees when the confidence interval of A - B lies within ±m). A decided verdict whose '
      'losing method was selected on an edge of its grid says "loser selected on a grid '
      'edge" (the loser might do better outside its grid). Claims not yet rerun with '
      'seeds are marked "pending rerun '
      '(single-seed page)" and link the old page, whose verdicts rest on one seed and are not '
      'decided.',
      '',
      'Tally: ' + ', '.join(f'{v}: {n}' for v, n in sorted(counts.items())) + '.',
      '',
      markdown_table(
        ['paper', 'ref', 'claim (A beats B)', 'afl_jax measures', 'verdict', 'page', 'regenerate'],
        rows,
      ),
      '',
    ]
  )
  path = path or str(RESULTS / 'README.md')
  with open(path, 'w') as f:
    f.write(text)
  return path


if __name__ == '__main__':
  print(write_summary())
