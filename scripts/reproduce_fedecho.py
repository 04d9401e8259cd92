"""Reproduce FedEcho's Table 2 / Table 7 claims on non-IID Fashion-MNIST at 2-core scale.

Wang, Ma, Chen, "Stragglers Can Contribute More: Uncertainty-Aware Distillation for
Asynchronous Federated Learning" (paper 002), Sec. 5.1 and 5.3: test accuracy of
FedBuff, CA2FL, FADAS and FedEcho under the large- and mild-delay models of Table 1
at two heterogeneity levels (Dirichlet 0.1 and 0.3), the Table 7 ablation of the
mixing weight alpha (0, 1, 0.5, dynamic), two controls (FedBuff at FedEcho's local
rate; FedEcho at the paper's distillation rate) and the server memory of Sec. 3.2 /
5.1 (logits store, checkpoints of past models held).

  python scripts/reproduce_fedecho.py [--out_dir=runs/reproduce_fedecho] [--rerun]

Writes docs/results/fedecho.md and docs/results/fedecho*.png. Finished runs in
--out_dir with the same config are reused.
"""

from __future__ import annotations

import os
import statistics
import time

import report as reporting
from absl import app, flags

from afl_jax.pipeline.build import build
from afl_jax.pipeline.devices import set_cpu_devices
from afl_jax.pipeline.loop import make_simulator
from afl_jax.servers.fedecho import memory_overhead

set_cpu_devices()  # before JAX starts its backend; importing afl_jax sets nothing

_OUT_DIR = flags.DEFINE_string('out_dir', 'runs/reproduce_fedecho', 'Root of the run workdirs.')
_RERUN = flags.DEFINE_bool('rerun', False, 'Run again even when a finished run exists.')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, 'docs', 'results')
PAGE = os.path.join(RESULTS, 'fedecho.md')
COMMAND = 'python scripts/reproduce_fedecho.py'
LAST = 5  # "final accuracy" = mean of the last LAST evaluations

SETTINGS = (('large', 0.1), ('large', 0.3), ('mild', 0.1), ('mild', 0.3))
HEADLINE = ('large', 0.1)  # the setting of Table 7
# method -> (display name, hparams override (None = configs/fedecho_fmnist.py's), Table 2
# of the paper (CIFAR-10, ResNet-18; FedEcho with CIFAR-100 as distillation set), in the
# order of SETTINGS, as mean +- std over three seeds).
METHODS = {
  'fedbuff': (
    'FedBuff',
    {'client_lr': 0.01, 'server_lr': 1.0},
    ('52.85±7.76', '51.44±8.74', '42.57±5.00', '41.60±5.10'),
  ),
  'ca2fl': (
    'CA2FL',
    {'client_lr': 0.01, 'server_lr': 1.0},
    ('55.33±7.87', '50.37±7.27', '42.99±7.93', '57.31±7.03'),
  ),
  'fadas': (
    'FADAS',
    {'client_lr': 0.1, 'server_lr': 1e-4},
    ('61.25±1.16', '75.43±2.77', '65.51±2.04', '74.85±1.30'),
  ),
  'fedecho': ('FedEcho', None, ('75.39±2.93', '84.11±1.49', '79.69±0.68', '83.74±0.96')),
}
BASELINES = ('fedbuff', 'ca2fl', 'fadas')
# Table 7 (CIFAR-10, Dir 0.1, large delay, CIFAR-100 distillation set).
ABLATION = {
  'alpha0': ('alpha = 0 (CE only)', {'alpha_mode': 'fixed', 'alpha': 0.0}, '71.01±2.79'),
  'alpha1': ('alpha = 1 (KL only)', {'alpha_mode': 'fixed', 'alpha': 1.0}, '74.86±3.14'),
  'alpha0.5': ('alpha = 0.5 (fixed mix)', {'alpha_mode': 'fixed', 'alpha': 0.5}, '74.92±2.54'),
  'dynamic': ('dynamic alpha in [0.2, 0.8]', {}, '75.39±2.93'),
}
PAPER_ETA_D = 3e-6
# Controls in the headline setting: label -> (display name, method, hparams; for fedecho
# the hparams are overrides of the config's).
CONTROLS = {
  'fedbuff_lr0.03': (
    'FedBuff, eta_l = 0.03 (= FedEcho with Q = 0)',
    'fedbuff',
    {'client_lr': 0.03, 'server_lr': 1.0},
  ),
  'fedecho_etad3e-6': (
    f'FedEcho, eta_d = {PAPER_ETA_D:g} (paper)',
    'fedecho',
    {'distill_lr': PAPER_ETA_D},
  ),
  'fedecho_etad3e-5': ('FedEcho, eta_d = 3e-5', 'fedecho', {'distill_lr': 3e-5}),
  'fedecho_etad3e-4': ('FedEcho, eta_d = 3e-4', 'fedecho', {'distill_lr': 3e-4}),
  'fadas_eta1e-3': ('FADAS, eta_g = 1e-3', 'fadas', {'client_lr': 0.1, 'server_lr': 1e-3}),
}


def label(method: str, delay: str, dirichlet: float) -> str:
  return f'{method}_{delay}_dir{dirichlet}'


def build_grid() -> dict:
  """Every run: configs/fedecho_fmnist.py with the setting and method overridden."""
  base = reporting.load_config('fedecho_fmnist')
  grid = {}

  def make(method, delay, dirichlet, hparams=None, extra_hparams=None):
    c = base.copy_and_resolve_references()
    c.algorithm = method
    if hparams is not None:
      c.hparams = dict(hparams)
    for k, v in (extra_hparams or {}).items():
      c.hparams[k] = v
    c.schedule.kind = f'fedecho_{delay}'
    c.dirichlet_alpha = dirichlet
    return c

  for delay, dirichlet in SETTINGS:
    for method, (_, hp, _) in METHODS.items():
      grid[label(method, delay, dirichlet)] = make(method, delay, dirichlet, hp)
  delay, dirichlet = HEADLINE
  for key, (_, hp, _) in ABLATION.items():
    if key != 'dynamic':
      grid[label(f'fedecho_{key}', delay, dirichlet)] = make(
        'fedecho', delay, dirichlet, extra_hparams=hp
      )
  # Controls and the rate sweep of the headline setting: FedBuff at FedEcho's eta_l
  # (FedEcho with Q = 0 is exactly this run), FedEcho at other distillation rates
  # (the paper's 3e-6 among them), FADAS at a larger global rate.
  for key, (_, method, hp) in CONTROLS.items():
    grid[label(key, delay, dirichlet)] = make(
      method,
      delay,
      dirichlet,
      hparams=None if method == 'fedecho' else hp,
      extra_hparams=hp if method == 'fedecho' else None,
    )
  return grid


# ---- numbers from the records -------------------------------------------------------
def stopped_at(records) -> str | None:
  return next((r['stopped'] for r in records if r.get('stopped')), None)


def summarize(records) -> dict:
  accs = [r['test_accuracy'] for r in records if 'test_accuracy' in r]
  tail = accs[-LAST:]
  return {
    'final': 100 * reporting.final(records, last=LAST),
    'best': 100 * max(accs),
    'tail_std': 100 * statistics.pstdev(tail) if len(tail) > 1 else 0.0,
    'stopped': stopped_at(records),
    'steps': records[-1]['step'],
  }


def cell(s: dict) -> str:
  if s['stopped']:
    return f'diverged ({s["stopped"]})'
  return f'{s["final"]:.1f} ± {s["tail_std"]:.1f}'


def main_table(s: dict) -> str:
  header = ['method']
  for d, a in SETTINGS:
    header += [f'{d}, Dir({a}): ours', 'paper']
  rows = []
  for method, (name, _, paper) in METHODS.items():
    row = [name]
    for (d, a), p in zip(SETTINGS, paper):
      row += [cell(s[label(method, d, a)]), p]
    rows.append(row)
  return reporting.markdown_table(header, rows)


def best_table(s: dict) -> str:
  header = ['method'] + [f'{d}, Dir({a})' for d, a in SETTINGS]
  rows = [
    [name] + [round(s[label(m, d, a)]['best'], 1) for d, a in SETTINGS]
    for m, (name, _, _) in METHODS.items()
  ]
  return reporting.markdown_table(header, rows)


TARGET = 0.70  # accuracy whose first crossing is reported (speed)


def target_table(runs: dict) -> str:
  header = ['method'] + [f'{d}, Dir({a})' for d, a in SETTINGS]
  rows = []
  for m, (name, _, _) in METHODS.items():
    hits = [reporting.first_reaching(runs[label(m, d, a)], TARGET) for d, a in SETTINGS]
    rows.append([name] + [h['step'] if h else None for h in hits])
  return reporting.markdown_table(header, rows)


def ablation_label(key: str) -> str:
  d, a = HEADLINE
  return label('fedecho' if key == 'dynamic' else f'fedecho_{key}', d, a)


def ablation_table(s: dict) -> str:
  rows = []
  for key, (name, _, paper) in ABLATION.items():
    r = s[ablation_label(key)]
    rows.append([name, cell(r), round(r['best'], 1), paper])
  return reporting.markdown_table(
    [
      'FedEcho variant (large delay, Dir(0.1))',
      f'ours: final acc. % (mean ± std of last {LAST} evals)',
      'ours: best acc. %',
      'paper Table 7 (CIFAR-10)',
    ],
    rows,
  )


def controls_table(s: dict) -> str:
  d, a = HEADLINE
  rows = []
  for m in ('fedbuff', 'fadas', 'fedecho'):
    hp = METHODS[m][1] or {'distill_lr': None}
    what = (
      f'eta_d = {reporting.load_config("fedecho_fmnist").hparams.distill_lr:g} (config)'
      if m == 'fedecho'
      else f'eta_l / eta_g = {hp["client_lr"]:g} / {hp["server_lr"]:g} (paper Table 8)'
    )
    r = s[label(m, d, a)]
    rows.append([f'{METHODS[m][0]}, {what}', cell(r), round(r['best'], 1)])
  for key, (name, _, _) in CONTROLS.items():
    r = s[label(key, d, a)]
    rows.append([name, cell(r), round(r['best'], 1)])
  return reporting.markdown_table(
    [
      f'run ({d} delay, Dir({a}))',
      f'final acc. % (mean ± std of last {LAST} evals)',
      'best acc. %',
    ],
    rows,
  )


# ---- memory (Sec. 3.2 / 5.1) --------------------------------------------------------
def engine_memory(c) -> dict:
  """Builds the run's Simulator (as train_and_evaluate does) and reads its memory."""
  run = build(c)
  schedule = run.schedule
  sim = make_simulator(run)
  state = sim.init(run.params0, run.key)
  over = memory_overhead(state.server, schedule)
  stats = schedule.stats()
  return {
    **over,
    'ring_size': sim.ring_size,
    'engine_total': sim.memory['total'],
    'ring_bytes': sim.memory['ring_buffer'],
    'tau_max': stats['tau_max'],
    'tau_avg': stats['tau_avg'],
    'num_u': int(run.data.unlabeled_x.shape[0]),
    'num_clients': run.data.num_clients,
    'mc': c.schedule.concurrency,
    'm': c.schedule.buffer_size,
  }


def memory_table(mem: dict) -> str:
  rows = []
  for (d, a), m in mem.items():
    rows.append(
      [
        f'{d}, Dir({a})',
        f'{m["tau_avg"]:.2f} / {m["tau_max"]}',
        f'{m["logits_bytes"] / 2**20:.2f} MiB ({m["logits_bytes_per_client"] / 2**10:.0f}'
        f' KiB x {m["num_clients"]})',
        f'{m["max_checkpoints"]:.0f} (mean {m["mean_checkpoints"]:.1f})',
        f'{m["checkpoint_bytes"] / 2**20:.2f} MiB',
        f'{m["ring_size"]} ({m["ring_bytes"] / 2**20:.2f} MiB)',
        m['tau_max'] + 1,
        f'{m["engine_total"] / 2**20:.1f} MiB',
      ]
    )
  return reporting.markdown_table(
    [
      'setting',
      'tau_avg / tau_max',
      'logits store N x size(U) x C (float32)',
      'past checkpoints held (max over steps)',
      'their size',
      'engine ring slots',
      'slots a tau_max + 1 window would need',
      'engine analytic total',
    ],
    rows,
  )


# ---- prose computed from the numbers ------------------------------------------------
def agree_disagree(s: dict, mem: dict, runs: dict) -> str:
  out = []
  name = {m: v[0] for m, v in METHODS.items()}
  # (1) FedEcho ahead of every baseline, in every setting, clearly under large delay.
  margins = {}
  for d, a in SETTINGS:
    fe = s[label('fedecho', d, a)]['final']
    best = max(BASELINES, key=lambda m: s[label(m, d, a)]['final'])
    margins[(d, a)] = (fe - s[label(best, d, a)]['final'], best)

  def verdict(gap):
    return (
      'clearly ahead'
      if gap >= 2.0
      else 'slightly ahead'
      if gap > 0.5
      else 'tied'
      if gap >= -0.5
      else 'behind'
    )

  parts = [
    f'{d} delay Dir({a}): {gap:+.1f} pp vs the best baseline {name[best]} ({verdict(gap)})'
    for (d, a), (gap, best) in margins.items()
  ]
  large = [margins[k][0] for k in SETTINGS if k[0] == 'large']
  claim1 = (
    'agrees'
    if all(g >= 2.0 for g in large)
    else 'partly agrees'
    if all(g > 0.5 for g in large)
    else 'disagrees'
  )
  weak = {
    (d, a): s[label('fedecho', d, a)]['final']
    - max(s[label(m, d, a)]['final'] for m in ('fedbuff', 'ca2fl'))
    for d, a in SETTINGS
  }
  n_weak = sum(g > 0.5 for g in weak.values())
  out.append(
    '- **FedEcho vs the baselines** (claim: FedEcho is clearly ahead of every '
    'baseline in every setting, by 8.7-14.2 pp over FADAS on CIFAR-10, the large '
    'delay included): ' + '; '.join(parts) + f'. Under the large delay this {claim1} '
    'with the paper (criterion: at least 2 pp ahead of the best baseline in both '
    'large-delay settings; within ±0.5 pp counts as tied). Against FedBuff and '
    f'CA2FL alone FedEcho is ahead in {n_weak} of 4 settings (by '
    f'{min(weak.values()):+.1f} to {max(weak.values()):+.1f} pp), the direction of '
    "Table 2, but at this scale FADAS with the paper's rates is as good as FedEcho. "
    f'Typical fluctuation of one run over its last {LAST} evaluations is '
    f'{statistics.mean(v["tail_std"] for v in s.values()):.1f} pp (one seed; the '
    "paper's seed std is 0.7-2.9 pp for FADAS and FedEcho), so gaps of 1-2 pp are "
    'within noise.'
  )

  # (1b) Speed: the first crossing of TARGET.
  def hit(m, d, a):
    r = reporting.first_reaching(runs[label(m, d, a)], TARGET)
    return r['step'] if r else float('inf')

  first = [
    (d, a) for d, a in SETTINGS if hit('fedecho', d, a) < min(hit(m, d, a) for m in BASELINES)
  ]
  out.append(
    f'- **Early training** (not a claim of the paper, whose Table 2 is final accuracy '
    f'after 500 rounds): FedEcho is the first to reach {100 * TARGET:.0f}% in '
    f'{len(first)} of 4 settings ('
    + ', '.join(
      f'{d} Dir({a}): {hit("fedecho", d, a)} vs FADAS {hit("fadas", d, a)} steps'
      for d, a in SETTINGS
    )
    + '); '
    + (
      'not consistently faster either.'
      if len(first) < 3
      else 'its advantage here is speed: the best baseline catches up (within 2 pp) by '
      'the end of the run.'
      if all(g < 2.0 for g, _ in margins.values())
      else 'it is faster and, in some settings, also ends ahead.'
    )
  )
  # (2) FADAS ahead of FedBuff and CA2FL (paper: in all four settings).
  wins = [
    (d, a)
    for d, a in SETTINGS
    if s[label('fadas', d, a)]['final']
    > max(s[label('fedbuff', d, a)]['final'], s[label('ca2fl', d, a)]['final'])
  ]
  out.append(
    f'- **FedBuff and CA2FL trail FADAS** (paper: in all four settings): FADAS is '
    f'ahead of both in {len(wins)} of 4 settings — '
    + ('agrees.' if len(wins) == 4 else 'partly agrees.' if wins else 'disagrees.')
  )
  # (3) Consistency across settings / within runs.
  spread = {
    m: max(s[label(m, d, a)]['final'] for d, a in SETTINGS)
    - min(s[label(m, d, a)]['final'] for d, a in SETTINGS)
    for m in METHODS
  }
  wobble = {m: statistics.mean(s[label(m, d, a)]['tail_std'] for d, a in SETTINGS) for m in METHODS}
  flattest = min(METHODS, key=lambda m: spread[m])
  steadiest = min(METHODS, key=lambda m: wobble[m])
  verdict = (
    'agrees'
    if flattest == steadiest == 'fedecho'
    else 'partly agrees'
    if 'fedecho' in (flattest, steadiest)
    else 'disagrees'
  )
  out.append(
    '- **Stability** (claim: FedEcho is more consistent across delay and '
    'heterogeneity): spread (max - min) of final accuracy across the four settings '
    + ', '.join(f'{name[m]} {spread[m]:.1f}' for m in METHODS)
    + ' pp (smallest: '
    + name[flattest]
    + '); mean fluctuation over the last '
    f'{LAST} evaluations '
    + ', '.join(f'{name[m]} {wobble[m]:.1f}' for m in METHODS)
    + ' pp (smallest: '
    + name[steadiest]
    + f') — {verdict}.'
  )
  # (4) Distillation itself: FedEcho vs FedBuff at the same eta_l, and the eta_d sweep.
  d, a = HEADLINE
  fe = s[label('fedecho', d, a)]['final']
  fb = s[label('fedbuff_lr0.03', d, a)]['final']
  etas = {
    PAPER_ETA_D: s[label('fedecho_etad3e-6', d, a)]['final'],
    3e-5: s[label('fedecho_etad3e-5', d, a)]['final'],
    configs_eta_d(): fe,
    3e-4: s[label('fedecho_etad3e-4', d, a)]['final'],
  }
  best_eta = max(etas, key=etas.get)
  fadas_hi = s[label('fadas_eta1e-3', d, a)]['final']
  out.append(
    f'- **What distillation adds** (large delay, Dir(0.1), same eta_l = 0.03): '
    f'FedEcho {fe:.1f}% vs FedBuff {fb:.1f}% ({fe - fb:+.1f} pp). Over eta_d: '
    + ', '.join(f'{k:g}: {v:.1f}%' for k, v in sorted(etas.items()))
    + f" (best {best_eta:g}). With the paper's eta_d = {PAPER_ETA_D:g} FedEcho is "
    f'{etas[PAPER_ETA_D] - fb:+.1f} pp from FedBuff'
    + (
      f' — at our {configs_q_total()} Adam distillation steps that rate moves each '
      f'weight by at most {configs_q_total() * PAPER_ETA_D:.4f}, so FedEcho is '
      'essentially FedBuff. Our '
      if abs(etas[PAPER_ETA_D] - fb) < 2.0
      else '. Our '
    )
    + f'eta_d was chosen on this setting and seed, so the headline FedEcho number is '
    f"optimistic; the baselines were not tuned beyond the paper's rates (FADAS with "
    f'eta_g = 1e-3 gives {fadas_hi:.1f}% vs {s[label("fadas", d, a)]["final"]:.1f}% at '
    f"the paper's 1e-4; FedBuff with eta_l = 0.03 {fb:.1f}% vs "
    f'{s[label("fedbuff", d, a)]["final"]:.1f}% at 0.01).'
  )
  # (5) Table 7.
  ab = {k: s[ablation_label(k)]['final'] for k in ABLATION}
  lowest = min(ab, key=ab.get)
  highest = max(ab, key=ab.get)
  noise = statistics.mean(s[ablation_label(k)]['tail_std'] for k in ABLATION)
  spread_ab = ab[highest] - ab[lowest]
  order = sorted(ab, key=ab.get, reverse=True)
  rank = order.index('dynamic') + 1
  out.append(
    '- **Table 7 ablation** (paper: alpha = 0 lowest, 71.0; alpha = 1 and 0.5 '
    'about 74.9; dynamic best, 75.4 — the last three within one seed std, about '
    '3 pp, of each other): '
    + ', '.join(f'{ABLATION[k][0]} {v:.1f}%' for k, v in ab.items())
    + f'. alpha = 0 lowest: {"yes — agrees" if lowest == "alpha0" else "no — disagrees"}'
    f'; dynamic alpha ranks {rank} of 4 '
    f'({"agrees" if rank == 1 else "disagrees"} with "best"). The whole ablation '
    f'spans {spread_ab:.1f} pp; the within-run fluctuation is about {noise:.1f} pp, '
    "and the paper's seed std (~3 pp) is larger than the spread of its own three "
    'best variants, so one seed cannot rank alpha = 1, 0.5 and dynamic.'
  )
  # (6) Memory.
  held = max(m['max_checkpoints'] for m in mem.values())
  mc = next(iter(mem.values()))['mc']
  ring = max(m['ring_size'] for m in mem.values())
  tau = max(m['tau_max'] for m in mem.values())
  logits = max(m['logits_bytes'] for m in mem.values())
  m0 = next(iter(mem.values()))
  model = m0['model_bytes']
  out.append(
    f'- **Memory** (paper: at most 8 past checkpoints with Mc = 25; a logits store '
    f'of N x |U| x C): at most {held:.0f} distinct past start versions are live '
    f'({"within" if held <= mc else "above"} the bound Mc = {mc}, '
    f"{'above' if held > 8 else 'within'} the paper's observed 8"
    + (
      '; Table 1 makes most jobs 10-50 s long, so with Mc jobs in flight and M = '
      f'{m0["m"]} per step a job typically overlaps several steps'
      if held > 8
      else ''
    )
    + f"). The engine's slot plan holds {ring} models (the live versions plus the "
    f'current one) where a staleness window would need tau_max + 1 = {tau + 1}. The '
    f'logits store is {logits / 2**20:.2f} MiB, {logits / model:.1f}x one model.'
  )
  return '\n'.join(out)


def configs_eta_d() -> float:
  return reporting.load_config('fedecho_fmnist').hparams.distill_lr


def configs_q_total() -> int:
  c = reporting.load_config('fedecho_fmnist')
  return c.hparams.distill_steps * c.num_rounds


def paper_claims() -> str:
  return '\n'.join(
    [
      'Sec. 5.1 trains ResNet-18 on CIFAR-10 with N = 50 clients, Dirichlet(0.1) and (0.3) '
      "label skew, FedBuff's buffer (concurrency Mc = 25, buffer M = 5), two local epochs of "
      'batch 50, 500 rounds, and simulates job times with Table 1 (each client is short '
      'U(1,2), medium U(3,5) or long — U(50,80) under the large delay, U(10,20) under the '
      'mild delay — in units of 10 s, at most 10% long). FedEcho distills on 2,000 '
      'unlabeled samples of an external set (CIFAR-100, STL10 or diffusion samples) with '
      'Adam (eta_d = 3e-6), nu = 5, alpha in [0.2, 0.8]. Claims checked here:',
      '',
      '1. FedEcho "consistently achieves substantially higher accuracy across all settings" '
      '(Table 2: 75.4 / 84.1 / 79.7 / 83.7 vs FADAS 61.3 / 75.4 / 65.5 / 74.9), and FedBuff '
      'and CA2FL "suffer from pronounced accuracy degradation under asynchronous delays".',
      '2. FedEcho "demonstrates greater stability, yielding more consistent performance '
      'across delay and heterogeneity conditions".',
      '3. Table 7: alpha = 0 (CE only) is worst, alpha = 1 and alpha = 0.5 are better, the '
      'dynamic alpha is best.',
      '4. Sec. 5.1, memory: the server needs to store at most 8 past global-model checkpoints '
      '(plus the per-client logits on the distillation set).',
    ]
  )


def setup_text(configs: dict, mem: dict) -> str:
  c = configs[label('fedecho', *HEADLINE)]
  hp = c.hparams
  m = mem[HEADLINE]
  return '\n'.join(
    [
      f'Scaled down to a 2-core CPU, one seed ({c.seed}): Fashion-MNIST and the MLP '
      f'784-200-200-10 ({int(m["model_bytes"] // 4)} parameters) instead of CIFAR-10 and '
      f'ResNet-18; a {c.train_subset}-sample subset of the training set, of which '
      f'{c.unlabeled_size} are held out with their labels dropped as the distillation set U '
      f'(in-distribution, whereas the paper uses an external set; |U| = {m["num_u"]} instead of '
      f'2,000), the rest split over N = {c.num_clients} clients by Dirichlet label skew; '
      f'K = {c.local_steps} local SGD steps of batch {c.batch_size} (paper: two epochs of '
      f'batch 50, weight decay 1e-4; we use none); {c.num_rounds} server steps (paper 500). '
      f"Delay model: Table 1 on FedBuff's event clock (schedule.kind = fedecho_large / "
      f'fedecho_mild, `afl_jax/schedules/fedecho_table1.py`) with Mc = '
      f'{c.schedule.concurrency}, M = {c.schedule.buffer_size} and the paper-unspecified '
      'gamma = 1 (category drawn with probability increasing in the sample count). All runs '
      'of a setting share the data split and the schedule.',
      f"Learning rates eta_l / eta_g from the paper's Table 8 (not re-tuned): FedBuff and "
      f'CA2FL 0.01 / 1.0, FADAS 0.1 / 1e-4 (AMSGrad, beta = (0.9, 0.99), delay-adaptive, '
      f'tau_c = 1), FedEcho {hp.client_lr} / {hp.server_lr}. FedEcho: Q = '
      f'{hp.distill_steps} distillation steps per server step on mini-batches of '
      f'{hp.distill_batch} of U (Q and |B| are not given in the paper), Adam with eta_d = '
      f'{hp.distill_lr:g}, nu = {hp.clip_norm}, alpha in [{hp.alpha_min}, {hp.alpha_max}], '
      'teacher = mean of the latest logits of every client that has reported. eta_d was '
      'picked in development on the large-delay Dir(0.1) setting, seed 0 (the sweep is '
      "re-run below; 1e-3 was also tried and was worse than 3e-4); the paper's 3e-6 is "
      'among the controls.',
      f'"Final accuracy" is the mean test accuracy (full 10,000-image test set) over the '
      f'last {LAST} evaluations (every {c.eval_every} steps, i.e. steps '
      f'{c.num_rounds - (LAST - 1) * c.eval_every}-{c.num_rounds}), ± their standard deviation '
      '(fluctuation within one run, not a seed std); the paper reports mean ± std over '
      'three seeds.',
    ]
  )


def main(argv):
  del argv
  t0 = time.time()
  configs = build_grid()
  runs = reporting.run_all(configs, _OUT_DIR.value, rerun=_RERUN.value)
  s = {k: summarize(v) for k, v in runs.items()}
  mem = {(d, a): engine_memory(configs[label('fedecho', d, a)]) for d, a in SETTINGS}

  plots = []
  for d, a in SETTINGS:
    name = 'fedecho.png' if (d, a) == HEADLINE else f'fedecho_{d}_dir{a}.png'
    reporting.plot(
      {METHODS[m][0]: runs[label(m, d, a)] for m in METHODS},
      os.path.join(RESULTS, name),
      title=f'non-IID FMNIST (MLP), {d} delay, Dirichlet({a})',
    )
    plots.append(f'![]({name})')
  d, a = HEADLINE
  abl = {ABLATION[k][0]: runs[ablation_label(k)] for k in ABLATION}
  for key in ('fedbuff_lr0.03', 'fedecho_etad3e-6'):
    abl['[control] ' + CONTROLS[key][0]] = runs[label(key, d, a)]
  reporting.plot(
    abl,
    os.path.join(RESULTS, 'fedecho_ablation.png'),
    title=f'FedEcho alpha ablation (Table 7), {d} delay, Dirichlet({a})',
  )

  sections = [
    ('What the paper claims', paper_claims()),
    ('Setup (scaled down)', setup_text(configs, mem)),
    (
      'Test accuracy (Table 2 analogue)',
      f'Final test accuracy in % (mean ± std of the last {LAST} evaluations, one seed) | '
      "the paper's Table 2 (CIFAR-10, ResNet-18, FedEcho with CIFAR-100 as distillation "
      'set, mean ± std over three seeds).\n\n'
      + main_table(s)
      + '\n\nBest test accuracy over the run (%):\n\n'
      + best_table(s)
      + f'\n\nServer steps to first reach {100 * TARGET:.0f}% test accuracy (evaluated every '
      f'{configs[label("fedecho", *HEADLINE)].eval_every} steps; — = never):\n\n'
      + target_table(runs),
    ),
    ('Ablation of alpha (Table 7 analogue)', ablation_table(s)),
    ('Controls and learning-rate sensitivity (headline setting)', controls_table(s)),
    (
      'Server memory (Sec. 3.2 / 5.1)',
      'From the FedEcho run of each setting: the server state holds the latest logits of '
      "every client on U; a client's logits are computed from its start checkpoint plus "
      'its update when it arrives, so the server keeps every past model some job in flight '
      'started from ("held", `servers.fedecho.held_checkpoints`, excluding the current '
      'model). The engine stores exactly the live versions in a host-planned slot buffer '
      '(`afl_jax/core/ring.py`, `Simulator.ring_size`); its analytic total is '
      '`Simulator.memory` (ring, server state with the logits store, data, working set).'
      '\n\n' + memory_table(mem),
    ),
    ('Curves', plots[0] + '\n\n' + '\n\n'.join(plots[1:]) + '\n\n![](fedecho_ablation.png)'),
    ('Where results agree / disagree', agree_disagree(s, mem, runs)),
  ]
  reporting.write_page(
    PAGE, 'FedEcho vs FedBuff, CA2FL, FADAS on non-IID Fashion-MNIST', sections, configs, COMMAND
  )
  print(f'wrote {PAGE} and docs/results/fedecho*.png in {time.time() - t0:.0f}s')


if __name__ == '__main__':
  app.run(main)
