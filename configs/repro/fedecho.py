"""FedEcho reproduction (paper 002: Wang, Ma, Chen, "Stragglers Can Contribute More"), declared.

CIFAR-10 / ResNet-18, N = 50, Dirichlet 0.1 / 0.3, FedBuff clock Mc = 25, M = 5,
Table 1's delays, distillation on 2,000 unlabeled samples of an external set;
baselines FedBuff, CA2FL, FedAC, FADAS (Table 2). Table 2 (large delay, Dir 0.1)
runs with FedEcho distilling on held-out Fashion-MNIST and on an external set
(scikit-learn's digits, ``config.unlabeled_source = 'digits'``).
"""

import dataclasses

from afl_jax.reproduction import spec

ROUNDS = 500  # server steps: the slowest clients (U(500, 800) s jobs) report >= 3 times
UNLABELED = 500  # |U|, the distillation set (paper: 2,000)
OWNED_AND_VAL = 12500  # training samples the clients own (10,500) + validation (2,000)


# The confirmatory test (issue 49): fresh test seeds, none of which an earlier test of the
# experiment used, for the experiments whose grid or seeds changed after a look at their
# test seeds (``looked``: the seeds looked at before).
CONFIRM = tuple(range(100, 110))
LOOKED = tuple(range(3, 13))


def scaled(c):
  """The shared setting (every method) + a validation split.

  Every method's clients own the same number of samples (10,500): with
  ``unlabeled_source = 'heldout'`` the 500 distillation samples are held out of a
  13,000-sample training subset (every method holds them out, only FedEcho distils
  on them); with an external set (digits) nothing is held out of a 12,500 subset.
  """
  c.dataset = 'fmnist'
  c.num_clients = 50
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.1
  c.unlabeled_size = UNLABELED
  c.train_subset = OWNED_AND_VAL + (UNLABELED if c.unlabeled_source == 'heldout' else 0)
  c.validation_size = 2000
  c.model = 'mlp'
  c.batch_size = 32
  c.local_epochs = 0
  c.local_steps = 5
  c.schedule.kind = 'fedecho_large'
  c.schedule.concurrency = 25
  c.schedule.buffer_size = 5
  c.num_rounds = ROUNDS
  c.eval_every = 50
  c.eval_train_samples = 1000


# FedEcho is tuned like the baselines: its client rate on the baselines' client-rate
# values, its distillation rate on two values that bracket the paper's eta_d = 3e-6.
CLIENT_LRS = (0.01, 0.03)
DISTILL_LRS = (1e-6, 1e-5)


def _fedecho(label: str, **fixed):
  return spec.Method(
    label,
    'fmnist:fedecho',
    grid={'hparams.client_lr': CLIENT_LRS, 'hparams.distill_lr': DISTILL_LRS},
    fixed={'hparams.distill_batch': 100, **fixed},
  )


BASELINE_LRS = (0.003, 0.01, 0.03, 0.1)  # 4 settings, as many as FedEcho's 2 x 2 grid
BASELINES = tuple(  # configs/fmnist.py:fedbuff, configs/fmnist.py:ca2fl on BASELINE_LRS
  spec.Method(label, f'fmnist:{label.lower()}', grid={'hparams.client_lr': BASELINE_LRS})
  for label in ('FedBuff', 'CA2FL')
)


def _delay(label: str, **fixed) -> spec.Method:
  return spec.Method(label, 'fmnist:fedbuff', {'hparams.client_lr': (0.01, 0.03, 0.1)}, fixed)


# No stragglers: FedBuff's clock with every job U(1, 2) (Table 1's short category for all).
NO_STRAGGLERS = {
  'schedule.kind': 'fedbuff',
  'schedule.durations': 'uniform',
  'schedule.durations_params': {'low': 1.0, 'high': 2.0},
}

# The verdict of the delay condition is read on 40 test seeds that were never looked at
# (100-139): on seeds 3-12 the difference was -0.029 [-0.063, +0.004] (its power column
# asked for about 22 seeds), on 3-22 -0.027 [-0.053, +0.000], and seeds 23-62, drawn after
# those looks, were a second look themselves.
FRESH_SEEDS = (
  'Seeds 3-12, then 3-22, left the difference undecided (-0.029 [-0.063, +0.004], then '
  '-0.027 [-0.053, +0.000]); seeds 23-62 were drawn after those looks (fresh seeds, but a '
  'second look). The confirmatory test runs on seeds 100-139, none of which was looked at.'
)

DEGRADE_QUOTE = (
  'Both tables also show that existing asynchronous FL baselines, particularly FedBuff '
  'and CA2FL, suffer from pronounced accuracy degradation under asynchronous delays.'
)
# The tally scores "FedBuff suffers degradation under delays" once, against a condition the
# paper ran (the mild delay, the conditions experiment); these checks are the project's own.
NEVER_RAN = (
  "a check of this project's: the paper never runs without stragglers; the tally scores "
  'the degradation once, mild against large delay (the conditions experiment)'
)

DELAY = spec.Experiment(
  key='delay',
  test_seeds=tuple(range(100, 140)),
  looked=tuple(range(3, 63)),
  title='The condition FedEcho addresses: does the large delay degrade FedBuff?',
  ref='Sec. 5.1 (Dir 0.1)',
  setting=(
    "Table 2's setting for FedBuff alone, under Table 1's large delay and with no "
    "stragglers (every client's jobs U(1, 2), Table 1's short category, on the same clock). "
    "FedEcho's claims are about recovering what the stragglers' delay costs; this "
    'experiment checks, before they are scored, that the delay costs FedBuff accuracy here.'
  ),
  base=spec.with_fields(scaled, keep=('schedule.kind',)),
  methods=(
    _delay('FedBuff (no stragglers)', **NO_STRAGGLERS),
    _delay('FedBuff (large)', **{'schedule.kind': 'fedecho_large'}),
  ),
  claims=(
    spec.Claim(
      'Sec. 5.1',
      'FedBuff suffers accuracy degradation under asynchronous delays (scored: FedBuff with '
      'no stragglers ends higher than under the large delay)',
      'FedBuff (no stragglers)',
      'FedBuff (large)',
      quote=DEGRADE_QUOTE,
      outside=NEVER_RAN,
    ),
  ),
  deviations=(
    "Table 2's deviations; the paper has no run without stragglers, so the reference "
    'condition is this project\'s reading of "degradation under delays".',
    'FedBuff only (the text names FedBuff and CA2FL) and 3 client-rate settings, to fit the '
    'shared 2-core CPU.',
    FRESH_SEEDS,
  ),
  second_look=FRESH_SEEDS,
)


def _own(claims, note: str) -> tuple:
  """``claims`` in ``note``'s setting of this project's (``note`` closes their text's
  parenthesis), outside the tally."""
  why = f"a check in a setting of this project's ({note}); " + NEVER_RAN.split('; ', 1)[1]
  return tuple(
    dataclasses.replace(c, text=c.text.replace(')', f', {note})'), outside=why) for c in claims
  )


# Why a selection on an edge of its grid stands (the edge rule): these grids were tested
# before the rule, and each extension is a selection sweep of its own on 2 shared cores.
NOT_EXTENDED = (
  'tested before the edge rule; extending the axis is a new selection sweep beyond this '
  "revision's 2-core budget, so the selection stands and a decided verdict against it "
  'names the edge'
)


# The same check with K = 20 local steps: a stale update then carries more client drift,
# the mechanism by which delay hurts in the paper's setting (two local epochs).
DELAY_K20 = dataclasses.replace(
  DELAY,
  key='delay_k20',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='The condition with K = 20 local steps: does the large delay degrade FedBuff?',
  setting=DELAY.setting + ' K = 20 local steps instead of 5 (more drift per stale update).',
  base=spec.with_fields(scaled, keep=('schedule.kind', 'local_steps')),
  methods=tuple(  # the rate grid one step lower: at K = 20 both selected 0.01 on 0.01-0.1
    m.variant({'local_steps': 20}, grid={'hparams.client_lr': (0.003, 0.01, 0.03)})
    for m in DELAY.methods
  ),
  claims=_own(DELAY.claims, 'K = 20'),
  second_look='',
  extended=(
    'on the client rates {0.01, 0.03, 0.1} both conditions selected 0.01, the low edge, and '
    'the test ran on seeds 3-12; the grid moved one step down, {0.003, 0.01, 0.03}, the '
    'selection ran again and the tests again on seeds 3-12 (2026-11-25).'
  ),
  edges_kept={'FedBuff (no stragglers)': NOT_EXTENDED},
  deviations=tuple(d for d in DELAY.deviations if d != FRESH_SEEDS)
  + ("A setting of this project's (K = 20), so its claim is scored outside the paper tally.",),
)

# Table 2 gives every method 9 settings: on 4 (FedEcho's client rate {0.01, 0.03} x its
# distillation rate {1e-6, 1e-5}) FedEcho was selected on the high edge of both rates.
TABLE2_FEDECHO_GRID = {
  'hparams.client_lr': (0.01, 0.03, 0.1),
  'hparams.distill_lr': (1e-6, 1e-5, 1e-4),
}
TABLE2_CLIENT_LRS = (0.003, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3)

DATASETS = (
  "Distillation sets, read against the paper's rows: FedEcho (held-out) distils on "
  'Fashion-MNIST samples no client owns and is read against FedEcho (STL10) (its classes '
  "overlap the clients' data, the nearest the paper has to an in-distribution set); FedEcho "
  "(digits) distils on scikit-learn's digits, another dataset, and is read against FedEcho "
  '(CIFAR-100).'
)

TABLE2 = spec.Experiment(
  key='table2',
  test_seeds=tuple(range(13, 23)),
  looked=LOOKED,
  title='Table 2: FedEcho vs FedBuff, CA2FL, FADAS, FedAC under the large delay',
  ref='Table 2 (Dir 0.1, large delay)',
  setting=(
    'N = 50 clients, Dirichlet 0.1, FedBuff clock Mc = 25, M = 5, Table 1 large-delay job '
    'times (30 short U(10, 20) s, 15 medium U(30, 50) s, 5 long U(500, 800) s clients), '
    'Fashion-MNIST, MLP 784-200-200-10, K = 5 local steps of batch 32, 10,500 training '
    'samples owned by the clients, 2,000 validation samples, 500 server steps (about '
    '2,550 simulated seconds). In these 500 steps every client of the long group reports '
    'at least 3 times (3.0-3.6 times on average over its 5 clients; a short client about '
    '63 times, a medium one about 39; seeds 0-2, both data layouts). FedEcho distils on '
    f'|U| = {UNLABELED} unlabeled samples, Q = 5 Adam steps per server step on batches of '
    '100, nu = 5, dynamic alpha in [0.2, 0.8]: FedEcho (held-out) on Fashion-MNIST '
    'training samples no client owns (every method holds them out), FedEcho (digits) on '
    "scikit-learn's digits (8x8, upsampled into a 20x20 box of a 28x28 frame, 0..16 scaled "
    "to the images' 0..255 and normalized like them: a different dataset, no sample taken "
    'from the clients, which then draw their 10,500 samples from a 12,500 instead of a '
    '13,000 subset).'
  ),
  base=scaled,
  extended=(
    'a first run gave every method 4 settings and, tested on seeds 3-12, selected FedEcho '
    'on the high edge of both its rates (client 0.03 of {0.01, 0.03}, distillation 1e-5 of '
    '{1e-6, 1e-5}) and FedAC on edges; every method now has 9 settings, scored on fresh '
    'test seeds 13-22, which the first run never looked at (2026-11-26).'
  ),
  methods=(
    _fedecho('FedEcho (held-out)').variant(grid=TABLE2_FEDECHO_GRID),
    _fedecho('FedEcho (digits)', unlabeled_source='digits').variant(grid=TABLE2_FEDECHO_GRID),
    *(m.variant(grid={'hparams.client_lr': TABLE2_CLIENT_LRS}) for m in BASELINES),
    spec.Method(
      'FADAS',
      'fmnist:fadas',
      grid={'hparams.server_lr': (1e-4, 2e-4, 3e-4, 5e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2)},
      fixed={'hparams.delay_rule': 'divide'},
    ),
    spec.Method(
      'FedAC',
      'fmnist:fedac',
      grid={'hparams.client_lr': (0.01, 0.03, 0.1), 'hparams.server_lr': (3e-5, 1e-4, 3e-4)},
    ),
  ),
  # paper_effect: Table 2 (CIFAR-10), large delay, Dir (0.1) column: FedBuff 52.85, CA2FL
  # 55.33, FADAS 61.25, FedAC 62.06; FedEcho (held-out) is read against FedEcho (STL10),
  # 77.81 (its classes overlap the clients' data, the nearest the paper has to an
  # in-distribution set), FedEcho (digits) against FedEcho (CIFAR-100), 75.39 (another
  # dataset).
  claims=tuple(
    spec.Claim(
      'Sec. 5.1, Table 2 (large delay, Dir 0.1)',
      f'FedEcho ({u}) achieves higher accuracy than {b}',
      f'FedEcho ({u})',
      b,
      quote=(
        'FedEcho consistently achieves substantially higher accuracy across all settings, '
        'regardless of the chosen server-side distillation dataset.'
      ),
      paper_effect=round(ours - theirs, 4),
      source=f'Table 2, CIFAR-10 / ResNet-18, large delay, Dir (0.1): FedEcho ({read}) '
      f'{100 * ours:.2f} - {b} {100 * theirs:.2f}',
    )
    for u, read, ours in (('held-out', 'STL10', 0.7781), ('digits', 'CIFAR-100', 0.7539))
    for b, theirs in (('FedBuff', 0.5285), ('CA2FL', 0.5533), ('FADAS', 0.6125), ('FedAC', 0.6206))
  ),
  deviations=(
    'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet-18; K = 5 local steps instead of two '
    'epochs; 500 server steps as in the paper.',
    f'Distillation set: {UNLABELED} samples (paper 2,000), held-out Fashion-MNIST or '
    "scikit-learn's digits (paper: CIFAR-100, STL10 or generated images); Q = 5 "
    'distillation steps on batches of 100 (the paper gives neither).',
    'Every method gets 9 settings: FedEcho its client rate (0.01, 0.03, 0.1) x its '
    "distillation rate (1e-6, 1e-5, 1e-4, around the paper's 3e-6); FedBuff and CA2FL the "
    'client rate (0.003-0.3); FADAS the server rate (1e-4-1e-2); FedAC the client rate '
    "(0.01, 0.03, 0.1) x the server rate (3e-5, 1e-4, 3e-4). Other rates are the paper's "
    'Table 8 / the configs.',
    DATASETS,
    'Dirichlet 0.1 and the large delay only (the paper also runs Dir 0.3 and the mild delay).',
    'The delay FedEcho exists to offset does not cost FedBuff accuracy in this setting (the '
    'delay experiments above: FedBuff ends higher under the large delay than with no '
    'stragglers), so these claims compare the methods without the degradation the paper '
    "attributes to the stragglers; the claims are scored as the paper's Table 2 states them.",
  ),
)


def _alpha(label: str, **fixed):
  return _fedecho(label, unlabeled_source='digits', **fixed).variant(grid=TABLE2_FEDECHO_GRID)


TABLE7 = spec.Experiment(
  key='table7',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Table 7: the dynamic alpha vs a fixed alpha = 0, 0.5, 1',
  ref='Table 7 (Dir 0.1, large delay)',
  setting=(
    "Table 2's setting with FedEcho distilling on scikit-learn's digits (the external set), "
    "each variant tuned on Table 2's 9 FedEcho settings (client rate {0.01, 0.03, 0.1} x "
    'distillation rate {1e-6, 1e-5, 1e-4}): '
    'the dynamic alpha in [0.2, 0.8] of eq. (4) against alpha fixed at 0 (cross-entropy on '
    "the teacher's pseudo-labels only), 0.5 and 1 (KL only)."
  ),
  base=scaled,
  methods=(
    _alpha('dynamic alpha'),
    *(
      _alpha(f'alpha = {a:g}', **{'hparams.alpha_mode': 'fixed', 'hparams.alpha': a})
      for a in (0.0, 0.5, 1.0)
    ),
  ),
  # Table 7 (CIFAR-10, large delay, Dir 0.1, CIFAR-100 distillation): dynamic 75.39,
  # alpha = 0 71.01, alpha = 0.5 74.92, alpha = 1 74.86.
  claims=tuple(
    spec.Claim(
      'Sec. 5.3, Table 7',
      f'the dynamic alpha beats {b}',
      'dynamic alpha',
      b,
      quote=(
        'Table 7 shows that using only CE loss leads to the lowest accuracy, while applying '
        'solely KL divergence or a fixed mixture number improves the performance. Notably, '
        'the dynamic alpha achieves the best overall result'
      ),
      paper_effect=round(0.7539 - theirs, 4),
      source=f'Table 7, CIFAR-10, large delay, Dir (0.1), CIFAR-100 distillation: dynamic '
      f'75.39 - {b} {100 * theirs:.2f}',
    )
    for b, theirs in (('alpha = 0', 0.7101), ('alpha = 0.5', 0.7492), ('alpha = 1', 0.7486))
  ),
  deviations=(
    "Table 2's deviations and its 9 FedEcho settings for every variant; the external set is "
    "scikit-learn's digits (paper: CIFAR-100).",
  ),
  extended=(
    'on 4 settings (client rate {0.01, 0.03} x distillation rate {1e-6, 1e-5}), tested on '
    'seeds 3-12, the dynamic alpha was selected on the high edge of both rates behind its '
    "three decided claims; every variant now has Table 2's 9 (108 selection runs, 27 min "
    'on 2 cores) and each selected the setting it had selected on 4, so the test runs on '
    'seeds 3-12 were the same computation (2026-11-26). Those seeds were looked at, so the '
    'verdicts rest on the confirmatory test on fresh seeds 100-109 (2026-11-29).'
  ),
  edges_kept={'alpha = 0': NOT_EXTENDED},
)

CONDITIONS = {  # label suffix -> (Table 1 delay model, Dirichlet alpha)
  'mild': ('fedecho_mild', 0.1),
  'large': ('fedecho_large', 0.1),
  'Dir 0.3': ('fedecho_large', 0.3),
}


def _condition(method: spec.Method, condition: str) -> spec.Method:
  """``method`` under ``condition`` (a key of CONDITIONS), which its label names."""
  kind, alpha = CONDITIONS[condition]
  return method.variant(
    {'schedule.kind': kind, 'dirichlet_alpha': alpha}, label=f'{method.label} ({condition})'
  )


# The text reads Table 2 as "FedBuff and CA2FL suffer pronounced degradation under delays"
# and "FedEcho demonstrates greater stability", but at Dir 0.1 FedBuff and CA2FL score 10-12
# points *higher* under the large delay than under the mild one (the cells' seed spread is
# 5-8 points). The claims below say what the text says; the consistency claims carry
# Table 2's effect under that reading.
STABILITY_QUOTE = (
  'In contrast, FedEcho demonstrates greater stability, yielding more consistent '
  'performance across delay and heterogeneity conditions.'
)


def _delay_claims() -> tuple:
  """Sec. 5.1 (Main results) at Dir 0.1: the large delay degrades FedBuff and CA2FL (the
  mild delay scores higher). Table 2's own cells go the other way (no paper effect)."""
  return tuple(
    spec.Claim(
      'Sec. 5.1, Main results (Dir 0.1)',
      f'the large delay degrades {b}: {b} scores higher under the mild delay than under the '
      'large one',
      f'{b} (mild)',
      f'{b} (large)',
      quote=DEGRADE_QUOTE + f' [Table 2, {b}, Dir (0.1): mild delay {mild}, large delay '
      f'{large}: the cells go the other way, with a seed spread of 5-8 points]',
      restated=(
        "stated as the paper's text (Sec. 5.1, Main results) says: the delays degrade "
        f'{b}. It was "{b} scores higher under the large delay than under the mild one", '
        "read off Table 2's cells, which contradict the text."
      ),
    )
    for b, large, mild in (('FedBuff', 52.85, 42.57), ('CA2FL', 55.33, 42.99))
  )


# Table 2 (CIFAR-10 / ResNet-18, mean of 3 seeds) at the large delay (Dir 0.1 and 0.3) and
# the mild delay (Dir 0.1); FedEcho's is its STL10 row (FedEcho (held-out) here).
CELLS = {
  'FedBuff': {'large': 52.85, 'Dir 0.3': 51.44, 'mild': 42.57},
  'CA2FL': {'large': 55.33, 'Dir 0.3': 50.37, 'mild': 42.99},
  'FedEcho': {'large': 77.81, 'Dir 0.3': 84.96, 'mild': 77.99},
}
CONSISTENCY = {  # the other condition -> (its ref, what it varies, from what)
  'mild': (
    'Sec. 5.1, Table 2 (Dir 0.1)',
    'delay conditions',
    'the mild to the large delay (Dir 0.1)',
  ),
  'Dir 0.3': (
    'Sec. 5.1, Main results (large delay)',
    'heterogeneity',
    'Dirichlet 0.3 to 0.1 (large delay)',
  ),
}


def _consistency(b: str, other: str) -> spec.Claim:
  """Sec. 5.1: FedEcho's accuracy changes less than ``b``'s (either sign) from the condition
  ``other`` to the large delay at Dir 0.1; counted only where ``b``'s accuracy changes."""
  ref, across, between = CONSISTENCY[other]
  changes = {m: abs(CELLS[m][other] - CELLS[m]['large']) for m in (b, 'FedEcho')}
  effect = changes[b] - changes['FedEcho']
  return spec.Claim(
    ref,
    f'FedEcho is more consistent than {b} across {across}: its accuracy changes less '
    f'(either sign) from {between}',
    'FedEcho (large)',
    f'{b} (large)',
    quote=STABILITY_QUOTE,
    paper_effect=round(effect / 100, 4),
    source=f'Table 2, CIFAR-10 / ResNet-18: {b} {CELLS[b][other]} -> {CELLS[b]["large"]} '
    f'(a change of {changes[b]:.2f}) against FedEcho (STL10) {CELLS["FedEcho"][other]} -> '
    f'{CELLS["FedEcho"]["large"]} ({changes["FedEcho"]:.2f})',
    baseline=(f'FedEcho ({other})', f'{b} ({other})'),
    consistency=True,
    condition=(f'{b} ({other})', f'{b} (large)'),
    restated=(
      "scored as consistency, the size of each method's change (either sign), as the text "
      'says "more consistent performance", where it was a signed drop ("loses less"); '
      f"counted only where {b}'s accuracy changes between the two conditions. Table 2 under "
      f'this reading: {effect:+.1f} pts ({b} moves {changes[b]:.2f} points, FedEcho '
      f'{changes["FedEcho"]:.2f}).'
    ),
  )


CONDITIONS_EXP = spec.Experiment(
  key='conditions',
  title='Table 2 / Sec. 5: degradation under delays and label skew (mild vs large delay, '
  'Dir 0.3 vs 0.1)',
  ref='Table 2, Sec. 5',
  setting=(
    "Table 2's setting (FedEcho distilling on held-out Fashion-MNIST) under three "
    'conditions: the mild delay (long clients U(100, 200) s) and the large delay '
    '(U(500, 800) s) at Dirichlet 0.1, and the large delay at Dirichlet 0.3.'
  ),
  base=spec.with_fields(scaled, keep=('schedule.kind', 'dirichlet_alpha')),
  methods=tuple(
    _condition(method, condition)
    for method in (_fedecho('FedEcho'), *BASELINES)
    for condition in CONDITIONS
  ),
  claims=_delay_claims()
  + tuple(_consistency(b, other) for other in CONSISTENCY for b in ('FedBuff', 'CA2FL')),
  deviations=(
    "Table 2's deviations (Fashion-MNIST + MLP, K = 5, |U| = 500, held-out distillation set).",
    'Every method gets 4 settings (FedEcho its client rate {0.01, 0.03} x distillation rate '
    '{1e-6, 1e-5}, FedBuff and CA2FL the client rate 0.003-0.1), tuned again under each '
    'condition.',
    "The paper's claims are read off Table 2 across its four columns; here each is a "
    'paired test over seeds of the change between two conditions: a signed drop for '
    '"degradation", its size (either sign) for "more consistent".',
    "Table 2 contradicts the paper's text at Dir 0.1: FedBuff and CA2FL score higher under "
    'the large delay than under the mild one (52.85 vs 42.57, 55.33 vs 42.99), with a seed '
    'spread of 5-8 points in those cells. Every claim here is stated as the text (Sec. 5.1, '
    'Main results) states it; the degradation claims carry no paper effect (the cells go '
    "the other way), the consistency claims Table 2's effect under that reading, and they "
    "count only where the baseline's accuracy changes between the two conditions (else "
    '"condition not reproduced").',
    'FedEcho distils on held-out Fashion-MNIST samples no client owns, read against the '
    "paper's FedEcho (STL10) row (see Table 2 above).",
  ),
  edges_kept={
    label: NOT_EXTENDED
    for label in ('FedEcho (mild)', 'FedEcho (large)', 'FedEcho (Dir 0.3)', 'CA2FL (mild)')
  },
)

# The same check when the stragglers are the largest clients: Table 1's categories with a
# small gamma (the paper: "a smaller gamma ties runtime more strongly to the sample count";
# it gives no value). Under Dirichlet 0.1 the five largest clients hold a large share of the
# data, much of it of labels few others own, so their rare, stale reports may cost accuracy.
STRAGGLER_GAMMA = 0.1

DELAY_LARGEST = dataclasses.replace(
  DELAY,
  key='delay_largest',
  test_seeds=tuple(range(100, 140)),
  looked=tuple(range(3, 63)),
  title='The condition when the largest clients are the stragglers (gamma = 0.1)',
  setting=DELAY.setting
  + f' Under the large delay, runtime categories with gamma = {STRAGGLER_GAMMA:g}: the '
  'largest clients are the long ones.',
  methods=(
    DELAY.methods[0],
    DELAY.methods[1].variant({'schedule.straggler_gamma': STRAGGLER_GAMMA}),
  ),
  claims=_own(DELAY.claims, 'the largest clients long'),
  second_look=(
    'Seeds 3-12 left the difference undecided (-0.024 [-0.056, +0.007]), seeds 3-22 were '
    'looked at (-0.038 [-0.060, -0.016]) and seeds 23-62 were drawn after those looks '
    '(fresh seeds, but a second look: -0.035 [-0.051, -0.020]). The verdict rests on its '
    'confirmatory test on seeds 100-139, none of which was looked at (2026-11-29).'
  ),
  deviations=tuple(d for d in DELAY.deviations if d != FRESH_SEEDS)
  + (
    f'gamma = {STRAGGLER_GAMMA:g} is a setting of this project (the paper gives no value), '
    'chosen to make the stragglers the clients whose data matter most; its claim is scored '
    'outside the paper tally.',
  ),
)


PAPER = spec.Paper(
  key='fedecho',
  number='002',
  citation=(
    'Wang, Ma, Chen, *Stragglers Can Contribute More: Uncertainty-Aware Distillation for '
    'Asynchronous Federated Learning*'
  ),
  setting=(
    'ResNet-18 on CIFAR-10, N = 50, Dirichlet 0.1 and 0.3, FedBuff Mc = 25, M = 5, two local '
    'epochs of batch 50, 500 rounds, Table 1 delays, distillation on 2,000 external '
    'unlabeled samples with Adam (eta_d = 3e-6), nu = 5, alpha in [0.2, 0.8].'
  ),
  experiments=(DELAY, DELAY_K20, DELAY_LARGEST, TABLE2, TABLE7, CONDITIONS_EXP),
)
