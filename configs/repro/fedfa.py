"""FedFa reproduction (paper 001: Xu, Zhang, Di, Liu, Alharthi, Cao, "FedFa"), declared.

CIFAR-10 / ResNet-18, 100 clients, 10 training at once, long-tailed client delays
(many fast, few slow clients), wall-clock and rounds to target accuracy (Tables 2-3),
FedFa with FedProx / FedNova clients (Table 6); baselines FedAvg, FedBuff, FedAsync
and Port. Tables 2-3 and 6, Table 2's synchronous / FedAsync comparison, Fig. 5 and
Table 5 run, every method tuned on a 5-value client-rate grid.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from afl_jax.reproduction import spec

UPDATES = 600  # client updates per run (every method gets the same number)
CLIENT_LRS = (0.003, 0.01, 0.03, 0.1, 0.3)  # 5 values: the optima inside the grid


# Sec. 5.3's statements, quoted by several claims below.
TABLE2_QUOTE = (
  'From Tab. 2, we observe that both of the two versions of our method outperform '
  'existing approaches, especially for FedFa-Delta.'
)
TABLE4_QUOTE = (
  'The accuracy of all three paradigms is similar to each other, while our fully '
  'asynchronous approach FedFa-Delta is time efficient.'
)


DELTA_BUFF = (0.6474, 0.6557)  # Table 4, CIFAR-10 non-IID: FedFa-Delta, FedBuff
# Table 4 ("Best Accuracy Comparison") calls the paradigms' best accuracies similar; its
# widest gap between two of them is 2.0 points (SST-2: FedAvg 0.891, FedBuff 0.871;
# Sent140: FedFa-Delta 0.7403, FedAvg 0.7209), so "similar" is read as within that gap.
SIMILAR = 0.02
# The target of Tables 2-3 (90% of the median selected validation accuracy, read before the
# test runs), declared for the experiments read alike with them.
TARGET = 0.74


def _similar(a: str, b: str, cells: tuple, a_text: str, b_text: str, outside='') -> spec.Claim:
  """Table 4's similar accuracies: ``a`` (``a_text`` in the claim) matches ``b``
  (``b_text``) in best accuracy within SIMILAR; ``cells`` Table 4's CIFAR-10 non-IID best
  accuracies of the paper's A and B."""
  return spec.Claim(
    'Sec. 5.3, Table 4',
    f"{a_text} matches {b_text} in best accuracy (within Table 4's widest gap, 2 points)",
    a,
    b,
    quote='Tab. 4 shows the optimal accuracy of the three foundational paradigms within a '
    'fixed number of communication rounds. ... ' + TABLE4_QUOTE,
    paper_effect=round(cells[0] - cells[1], 4),
    source=f'Table 4, CIFAR-10 non-IID, best accuracy: {a.split(" (")[0]} {cells[0]}, {b} '
    f'{cells[1]}',
    metric='best_test_accuracy',
    kind='equivalent',
    margin=SIMILAR,
    outside=outside,
    restated=(
      'scored on the best test accuracy of each run, as Table 4 reports ("Best Accuracy '
      'Comparison"), where it was the final accuracy; the margin is the widest gap Table 4 '
      'itself calls similar (2.0 points, SST-2 and Sent140), no longer a margin of the '
      "project's own."
    ),
  )


SPEEDUP_QUOTE = (
  'FedFa-Delta achieves up to 7x and 5x speedup compared to synchronous methods and '
  'semi-asynchronous methods, respectively.'
)
# Eq. (4) has two readings: literally (eta_g = 1, every delta in the window of K added with
# weight 1/K on each of the K arrivals it stays for: total weight 1, K times FedBuff's), and
# with eta_g = 1/K (server_lr = 0.2 at K = 5: total weight 1/K, as FedBuff's buffer of K
# gives each delta). The tally scores each statement once, on the literal reading; the
# 1/K reading is scored outside it.
ONE_OVER_K = (
  'another reading of eq. (4) (eta_g = 1/K, the total weight FedBuff gives a delta); the '
  'tally scores the statement with eq. (4) read literally (eta_g = 1)'
)


def _speedup(than: str, paper: str, factor: float, seconds: float) -> tuple:
  """Table 2: ``than`` needs ``factor`` times the wall-clock of FedFa-Delta to the target
  (the paper: ``paper`` times; ``seconds`` its CIFAR-10 non-IID time against FedFa-Delta's
  1917 s), on either reading of eq. (4) (the 1/K one outside the tally)."""
  return tuple(
    spec.Claim(
      ref,
      f'{than} needs {paper}x the wall-clock of FedFa-Delta ({reading}) to the target '
      f'(scored: >= {factor:g}x)',
      delta,
      than,
      quote=SPEEDUP_QUOTE,
      paper_effect=round(seconds / 1917, 2),
      source=f'Table 2, CIFAR-10 non-IID, to 60%: {than} {seconds:g} / FedFa-Delta 1917 s',
      metric='clock_to_target',
      factor=factor,
      outside=outside,
    )
    for ref, reading, delta, outside in (
      ('Sec. 5.3, Table 2', 'eq. (4) literal, eta_g = 1', 'FedFa-Delta', ''),
      (
        'Sec. 5.3, Table 2 (eq. (4), 1/K reading)',
        'eq. (4) read with eta_g = 1/K',
        'FedFa-Delta (1/K)',
        ONE_OVER_K,
      ),
    )
  )


def scaled(c):
  """configs/fmnist.py, setting FEDFA + persistent per-client speeds and a validation split."""
  c.schedule.concurrency = 10
  c.schedule.client_speed = 'lognormal'  # fixed speeds: stragglers persist (the paper)
  c.schedule.client_speed_sigma = 1.0
  c.validation_size = 2000
  c.eval_train_samples = 1000


# FedFa-Delta at eta_g = 1 applies each client's delta once per arrival while it stays in
# the window of K: about K times. Its optimum on CLIENT_LRS was the low edge (0.003), so it
# is tuned on the grid a decade down (the same budget).
DELTA_LRS = (0.001, 0.003, 0.01, 0.03, 0.1)


# The clocks, each spending UPDATES client updates: one per server step (fully
# asynchronous), FedBuff's buffer of 5, or synchronous rounds of ``cohort`` clients (FedAvg,
# waiting for the slowest).
FULLY_ASYNC = {'schedule.kind': 'fully_async', 'num_rounds': UPDATES, 'eval_every': 2}
BUFFERED = {'schedule.buffer_size': 5, 'num_rounds': UPDATES // 5, 'eval_every': 2}


def synchronous(cohort: int = 10) -> dict:
  return {'schedule.clients_per_step': cohort, 'num_rounds': UPDATES // cohort, 'eval_every': 1}


def _method(cfg: str, label: str, clock: dict, fixed: Mapping[str, Any] = {}) -> spec.Method:
  """``cfg`` on ``clock`` with the ``fixed`` fields, tuned on the client rate: CLIENT_LRS,
  DELTA_LRS for FedFa-Delta at eta_g = 1."""
  delta = cfg.startswith('fmnist:fedfa_delta') and 'hparams.server_lr' not in fixed
  grid = {'hparams.client_lr': DELTA_LRS if delta else CLIENT_LRS}
  return spec.Method(label, cfg, grid, {**clock, **fixed})


# FedFa-Delta at the paper's eta_g = 1 and this project's 1/K variant (Tables 2-3, Table 2).
DELTAS = (
  _method('fmnist:fedfa_delta', 'FedFa-Delta', FULLY_ASYNC),
  _method('fmnist:fedfa_delta', 'FedFa-Delta (1/K)', FULLY_ASYNC, {'hparams.server_lr': 0.2}),
)

SETTING = (
  'configs/fmnist.py, setting FEDFA: Fashion-MNIST, MLP, 15,000 training samples (2,000 of '
  'them the validation split), 100 clients (Dirichlet 0.5), Mc = 10 training at once, '
  'log-normal job durations times a fixed per-client log-normal speed factor (sigma 1: '
  f'many fast, few persistent stragglers), {UPDATES} client updates per method.'
)

TABLE2 = spec.Experiment(
  key='table2',
  title='Tables 2-3: FedFa vs FedBuff and Port at an equal number of client updates',
  ref='Tables 2-3',
  setting=SETTING,
  base=scaled,
  methods=(
    _method('fmnist:fedbuff', 'FedBuff', BUFFERED),
    _method('fmnist:port', 'Port', BUFFERED, {'schedule.kind': 'port'}),
    _method('fmnist:fedfa_param', 'FedFa-Param', FULLY_ASYNC),
    *DELTAS,
  ),
  # The paper has no Fashion-MNIST: every paper_effect is its CIFAR-10 non-IID column
  # (Dirichlet, the nearest to this non-IID setting). Table 2 gives wall-clock seconds to
  # 60% (FedAvg 9833, FedBuff 4375, Port-Non-Urgent 3320, FedFa-Param 2282, FedFa-Delta
  # 1917): an effect in seconds is in the paper's clock, not this simulated one; the ratios
  # carry over. Table 4 gives the best accuracy (FedAvg 0.6570, FedBuff 0.6557, FedFa-Param
  # 0.6539, FedFa-Delta 0.6474; Port is not in Table 4).
  claims=(
    spec.Claim(
      'Sec. 5.3, Table 2',
      'FedFa-Delta (eq. (4) literal, eta_g = 1) reaches the target in less simulated time '
      "than Port (the paper's Port-Non-Urgent: 1.7x)",
      'FedFa-Delta',
      'Port',
      quote=TABLE2_QUOTE,
      paper_effect=1.73,
      source='Table 2, CIFAR-10 non-IID, to 60%: Port-Non-Urgent 3320 / FedFa-Delta 1917 s',
      metric='clock_to_target',
    ),
    _similar(
      'FedFa-Delta', 'FedBuff', DELTA_BUFF, 'FedFa-Delta (eq. (4) literal, eta_g = 1)', 'FedBuff'
    ),
    spec.Claim(
      'Sec. 5.3, Table 2',
      'FedFa-Param reaches the target in less simulated time than FedBuff',
      'FedFa-Param',
      'FedBuff',
      quote=TABLE2_QUOTE,
      paper_effect=1.92,
      source='Table 2, CIFAR-10 non-IID, to 60%: FedBuff 4375 / FedFa-Param 2282 s',
      metric='clock_to_target',
    ),
    _similar('FedFa-Param', 'FedBuff', (0.6539, 0.6557), 'FedFa-Param', 'FedBuff'),
    dataclasses.replace(
      _similar(
        'FedFa-Delta (1/K)',
        'FedBuff',
        DELTA_BUFF,
        'FedFa-Delta (eq. (4), eta_g = 1/K)',
        'FedBuff',
        ONE_OVER_K,
      ),
      ref='Sec. 5.3, Table 4 (eq. (4), 1/K reading)',
    ),
    *_speedup('FedBuff', '2-4.5', 2.0, 4375),
  ),
  deviations=(
    'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet-18; accuracy after an equal number '
    'of client updates, and simulated wall-clock to the target (Table 2 measures time) '
    "within those updates. Table 2's claims are scored on the simulated time to the "
    "target (as speedup ratios), Table 4's similar best accuracies as equivalences within "
    'the widest gap Table 4 calls similar (2 points).',
    "Port runs on its staleness-bounded clock (schedule.kind='port', B = 10, non-urgent).",
    'Eq. (4) read literally (FedFa-Delta, eta_g = 1) and with eta_g = 1/K (FedFa-Delta '
    '(1/K), server_lr = 0.2 at K = 5) are separate methods; the tally scores each statement '
    'on the literal reading, the 1/K reading outside it.',
    f'Every method is tuned on the client-rate grid {list(CLIENT_LRS)} (a first run on '
    '0.01-0.1 selected an edge for every method of this table), FedFa-Delta at eta_g = 1 '
    f'(here and with FedProx / FedNova clients) on {list(DELTA_LRS)}: on the first grid '
    'it selected its low edge, 0.003.',
  ),
)

TABLE6 = spec.Experiment(
  key='table6',
  title='Table 6: FedFa with FedProx / FedNova clients',
  ref='Table 6',
  setting=SETTING,
  base=scaled,
  methods=(
    _method('fmnist:fedbuff_prox', 'FedBuff + FedProx', BUFFERED),
    _method('fmnist:fedfa_delta_prox', 'FedFa + FedProx', FULLY_ASYNC),
    _method('fmnist:fedbuff_nova', 'FedBuff + FedNova', BUFFERED),
    _method('fmnist:fedfa_delta_nova', 'FedFa + FedNova', FULLY_ASYNC),
  ),
  # Table 6 compares FedFa + FedProx / FedNova with the *synchronous* FedProx / FedNova
  # (wall time to the target: FedProx 1184 vs 3469 s, FedNova 1290 vs 4576 s, CIFAR-10);
  # this experiment runs FedBuff with those clients instead, so both contrasts are this
  # project's (outside the tally), on the paper's metric (time to target).
  claims=tuple(
    spec.Claim(
      'Table 6 (against FedBuff)',
      f'FedFa + {name} reaches the target in less simulated time than FedBuff + {name}',
      f'FedFa + {name}',
      f'FedBuff + {name}',
      metric='clock_to_target',
      outside="a contrast of this project's: the paper's reference is synchronous "
      f'{name}, not run here',
    )
    for name in ('FedProx', 'FedNova')
  ),
  deviations=(
    'As Tables 2-3.',
    "Table 6's reference is synchronous FedProx / FedNova; here FedBuff with FedProx / "
    'FedNova clients, so its contrasts are scored outside the paper tally.',
  ),
)


TABLE2_SYNC = spec.Experiment(
  key='table2_sync',
  title='Table 2: FedFa-Delta against synchronous FedAvg and fully asynchronous FedAsync',
  ref='Table 2',
  setting=SETTING
  + ' FedAvg trains synchronous cohorts of 10 clients (60 rounds), waiting for the slowest.',
  base=scaled,
  methods=(
    *DELTAS,
    _method('fmnist:fedavg', 'FedAvg', synchronous()),
    _method('fmnist:fedasync', 'FedAsync', FULLY_ASYNC),
  ),
  # paper_effect: CIFAR-10 non-IID column of Tables 2 and 4, as in the Tables 2-3 experiment.
  claims=(
    *_speedup('FedAvg', '5-7', 5.0, 9833),
    spec.Claim(
      'Sec. 5.3, Table 2',
      'FedAsync never reaches the target (on every test seed; shown beside FedFa-Delta)',
      'FedAsync',
      'FedFa-Delta',
      quote='The Fedasync algorithm fails to achieve the target accuracy.',
      metric='not_reached',
      kind='on_seeds',
    ),
    _similar(
      'FedFa-Delta',
      'FedAvg',
      (0.6474, 0.6570),
      'FedFa-Delta (eq. (4) literal, eta_g = 1)',
      'synchronous FedAvg',
    ),
  ),
  target=TARGET,
  deviations=(
    f'As Tables 2-3 (every method tuned on the client-rate grid {list(CLIENT_LRS)}).',
    f'Target {TARGET:.0%}, the default target of Tables 2-3 above (read from validation), '
    'so the two experiments read alike.',
    "FedAsync at its config's mixing alpha = 0.6 with polynomial staleness weights (a = 0.5).",
  ),
)


def _window(k: int) -> spec.Method:
  return _method('fmnist:fedfa_param', f'K = {k}', FULLY_ASYNC, {'hparams.window_size': k})


FIG5 = spec.Experiment(
  key='fig5_window',
  title='Fig. 5: the window size K of FedFa-Param',
  ref='Fig. 5',
  setting=SETTING + ' FedFa-Param with its sliding window of the last K = 5, 10 or 20 arrivals.',
  base=scaled,
  methods=(_window(5), _window(10), _window(20)),
  claims=(
    spec.Claim(
      'Sec. 5.3, Fig. 5',
      'the window size K barely matters in a reasonable range (K = 5 matches K = 10 in best '
      "accuracy within 2 points, Table 4's widest similar gap)",
      'K = 5',
      'K = 10',
      quote=(
        'Changing the buffer size K within a reasonable range does not significantly impact '
        'the model accuracy'
      ),
      metric='best_test_accuracy',
      kind='equivalent',
      margin=SIMILAR,
      restated=(
        'scored on the best accuracy so far (Fig. 5 plots "the current optimal model '
        'accuracy"), where it was the final accuracy; the 2-point margin is borrowed from '
        'Table 4, the widest gap the paper calls similar (Fig. 5 gives no number).'
      ),
    ),
    spec.Claim(
      'Sec. 5.3, Fig. 5',
      'K = 20 is slower (K = 10 reaches the target in less simulated time than K = 20)',
      'K = 10',
      'K = 20',
      quote=(
        '... while vastly increasing the K will slow down the training procedure, such as '
        'setting the K=20.'
      ),
      metric='clock_to_target',
    ),
  ),
  target=TARGET,
  deviations=(
    'As Tables 2-3; client rate tuned per K on the same 5-value grid.',
    'Fig. 5 plots the best accuracy so far over time: "K = 5 matches K = 10" is scored on '
    "each run's best accuracy within Table 4's 2-point gap (the paper gives no margin for "
    'Fig. 5), and "slower" as the simulated seconds to '
    f'{TARGET:.0%} (the target of Tables 2-3 above), the first time the best accuracy so far '
    'reaches it.',
  ),
)

MC_LOW, MC_HIGH = 5, 20  # Table 5 varies Mc over 2, 5, 10, 20


def _at_mc(method: spec.Method, mc: int) -> spec.Method:
  """``method`` with ``mc`` clients training at once (FedAvg: cohorts of ``mc``)."""
  label = f'{method.label} (Mc = {mc})'
  if method.config == 'fmnist:fedavg':
    return _method('fmnist:fedavg', label, synchronous(mc))
  return method.variant({'schedule.concurrency': mc}, label=label)


TABLE5_BEST = (
  'scored on the best test accuracy within an equal simulated time (Table 5: "the best '
  'accuracy of the model which is trained within a defined period of time"): on each test '
  "seed, the time both of a method's runs at Mc = 5 and 20 cover, where it was the best "
  'accuracy within the same 600 client updates (and before, the final accuracy).'
)

# Table 5 (CIFAR-10, best accuracy within a fixed time) at Mc = 5 and Mc = 20.
TABLE5_CELLS = {
  'FedAvg': (0.6757, 0.6017),
  'FedBuff': (0.6688, 0.6045),
  'FedFa-Delta': (0.6755, 0.6356),
}


def _drop(name: str) -> float:
  return TABLE5_CELLS[name][0] - TABLE5_CELLS[name][1]


_TABLE5 = (
  _method('fmnist:fedavg', 'FedAvg', synchronous()),
  _method('fmnist:fedbuff', 'FedBuff', BUFFERED),
  _method('fmnist:fedfa_delta', 'FedFa-Delta', FULLY_ASYNC),
)

TABLE5 = spec.Experiment(
  key='table5_mc',
  title=f'Table 5: sensitivity to the concurrency Mc ({MC_LOW} vs {MC_HIGH})',
  ref='Table 5',
  setting=SETTING.replace(
    'Mc = 10 training at once', f'Mc = {MC_LOW} or {MC_HIGH} training at once'
  ),
  base=spec.with_fields(scaled, keep=('schedule.concurrency',)),
  methods=tuple(_at_mc(m, mc) for m in _TABLE5 for mc in (MC_LOW, MC_HIGH)),
  claims=tuple(
    spec.Claim(
      'Sec. 5.3, Table 5',
      f'all the algorithms lose accuracy as Mc increases ({name}: Mc = {MC_LOW} beats '
      f'Mc = {MC_HIGH})',
      f'{name} (Mc = {MC_LOW})',
      f'{name} (Mc = {MC_HIGH})',
      quote=(
        'As shown in Tab. 5, the results of all the algorithms show some decrease in model '
        'accuracy as Mc increases.'
      ),
      paper_effect=round(TABLE5_CELLS[name][0] - TABLE5_CELLS[name][1], 4),
      source=f'Table 5, CIFAR-10, Mc = {MC_LOW} -> {MC_HIGH}: {name} '
      f'{TABLE5_CELLS[name][0]} -> {TABLE5_CELLS[name][1]}',
      metric='best_test_accuracy',
      equal_time=True,
      restated=TABLE5_BEST,
    )
    for name in TABLE5_CELLS
  )
  + tuple(
    spec.Claim(
      'Sec. 5.3, Table 5',
      f'FedFa-Delta is less sensitive to Mc than {name} (a smaller accuracy drop from '
      f'Mc = {MC_LOW} to {MC_HIGH})',
      f'FedFa-Delta (Mc = {MC_HIGH})',
      f'{name} (Mc = {MC_HIGH})',
      quote='Moreover, our algorithm is less insensitive to Mc than other algorithms.',
      paper_effect=round(_drop(name) - _drop('FedFa-Delta'), 4),
      source=f'Table 5, CIFAR-10, Mc = {MC_LOW} -> {MC_HIGH}: {name} drops '
      f'{_drop(name):.4f}, FedFa-Delta {_drop("FedFa-Delta"):.4f}',
      metric='best_test_accuracy',
      equal_time=True,
      restated=TABLE5_BEST,
      baseline=(f'FedFa-Delta (Mc = {MC_LOW})', f'{name} (Mc = {MC_LOW})'),
      condition=(f'{name} (Mc = {MC_LOW})', f'{name} (Mc = {MC_HIGH})'),
    )
    for name in ('FedAvg', 'FedBuff')
  ),
  deviations=(
    'As Tables 2-3; every method tuned on the same 5-value client-rate grid at each Mc '
    f'(FedFa-Delta on {list(DELTA_LRS)}).',
    'The paper reports the best accuracy within one defined period of time for every '
    "method; here each method's two runs (Mc = 5 and 20) are read within the simulated time "
    'both cover on each test seed (the Mc = 20 run, which does its '
    f'{UPDATES} client updates sooner): one budget per method and seed, not one for the '
    'table, because the runs stop at a number of updates. FedBuff keeps its buffer of 5 at '
    'both Mc (at Mc = 5 its server steps then wait for every running client).',
  ),
)

PAPER = spec.Paper(
  key='fedfa',
  number='001',
  citation=(
    'Xu, Zhang, Di, Liu, Alharthi, Cao, *FedFa: A Fully Asynchronous Training Paradigm '
    'for Federated Learning*'
  ),
  setting=(
    'CIFAR-10 / ResNet-18 (and Sent140, SST-2), 100 clients, 10 training at once, '
    'long-tailed client delays, target accuracy 0.6 (CIFAR-10 non-IID).'
  ),
  experiments=(TABLE2, TABLE6, TABLE2_SYNC, FIG5, TABLE5),
)
