"""FedEcho reproduction (paper 002: Wang, Ma, Chen, "Stragglers Can Contribute More"), declared.

CIFAR-10 / ResNet-18, N = 50, Dirichlet 0.1 / 0.3, FedBuff clock Mc = 25, M = 5,
Table 1's delays, distillation on 2,000 unlabeled samples of an external set;
baselines FedBuff, CA2FL, FedAC, FADAS (Table 2). Table 2 (large delay, Dir 0.1)
runs with FedEcho distilling on held-out Fashion-MNIST and on an external set
(scikit-learn's digits, ``config.unlabeled_source = 'digits'``).
"""

import dataclasses

from afl_jax.reproduction import spec

TEXT = spec.prose(__file__)  # the pages' prose: settings and deviations

ROUNDS = 500  # server steps: the slowest clients (U(500, 800) s jobs) report >= 3 times
UNLABELED = 500  # |U|, the distillation set (paper: 2,000)
OWNED_AND_VAL = 12500  # training samples the clients own (10,500) + validation (2,000)


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
  'schedule.durations_params': 'low=1,high=2',
}

# The verdict of the delay condition is read on 40 test seeds that were never looked at:
# on seeds 3-12 the difference was -0.029 [-0.063, +0.004] (its power column asked for
# about 22 seeds), and on 3-22 -0.027 [-0.053, +0.000]; extending a sample after looking
# at it biases the test, fresh seeds do not.
DELAY = spec.Experiment(
  key='delay',
  title='The condition FedEcho addresses: does the large delay degrade FedBuff?',
  ref='Sec. 5.1 (Dir 0.1)',
  **TEXT['delay'],
  base=spec.keeping(scaled, 'schedule.kind'),
  test_seeds=tuple(range(23, 63)),  # 40 fresh seeds: see the comment above
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
      quote=(
        'Both tables also show that existing asynchronous FL baselines, particularly FedBuff '
        'and CA2FL, suffer from pronounced accuracy degradation under asynchronous delays.'
      ),
    ),
  ),
)


# The same check with K = 20 local steps: a stale update then carries more client drift,
# the mechanism by which delay hurts in the paper's setting (two local epochs).
DELAY_K20 = dataclasses.replace(
  DELAY,
  key='delay_k20',
  test_seeds=tuple(range(3, 13)),  # 10: on them the difference asked for about 270
  title='The condition with K = 20 local steps: does the large delay degrade FedBuff?',
  **TEXT['delay_k20'],
  base=spec.keeping(scaled, 'schedule.kind', 'local_steps'),
  methods=tuple(  # the rate grid one step lower: at K = 20 both selected 0.01 on 0.01-0.1
    dataclasses.replace(
      m, grid={'hparams.client_lr': (0.003, 0.01, 0.03)}, fixed={**m.fixed, 'local_steps': 20}
    )
    for m in DELAY.methods
  ),
  claims=tuple(
    dataclasses.replace(c, text=c.text.replace(')', ', K = 20)'), added=True) for c in DELAY.claims
  ),
)

TABLE2 = spec.Experiment(
  key='table2',
  title='Table 2: FedEcho vs FedBuff, CA2FL, FADAS, FedAC under the large delay',
  ref='Table 2 (Dir 0.1, large delay)',
  **TEXT['table2'],
  base=scaled,
  methods=(
    _fedecho('FedEcho (held-out)'),
    _fedecho('FedEcho (digits)', unlabeled_source='digits'),
    *BASELINES,
    spec.Method(
      'FADAS',
      'fmnist:fadas',
      grid={'hparams.server_lr': (1e-4, 3e-4, 1e-3, 3e-3)},
      fixed={'hparams.delay_rule': 'divide'},
    ),
    spec.Method(
      'FedAC',
      'fmnist:fedac',
      grid={'hparams.client_lr': (0.01, 0.03), 'hparams.server_lr': (1e-4, 1e-3)},
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
    )
    for u, ours in (('held-out', 0.7781), ('digits', 0.7539))
    for b, theirs in (('FedBuff', 0.5285), ('CA2FL', 0.5533), ('FADAS', 0.6125), ('FedAC', 0.6206))
  ),
)


def _alpha(label: str, **fixed):
  return _fedecho(label, unlabeled_source='digits', **fixed)


TABLE7 = spec.Experiment(
  key='table7',
  title='Table 7: the dynamic alpha vs a fixed alpha = 0, 0.5, 1',
  ref='Table 7 (Dir 0.1, large delay)',
  **TEXT['table7'],
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
      paper_effect=effect,  # Table 7: dynamic 0.7539 - this alpha
    )
    for b, effect in (('alpha = 0', 0.0438), ('alpha = 0.5', 0.0047), ('alpha = 1', 0.0053))
  ),
)

CONDITIONS = {  # label suffix -> (Table 1 delay model, Dirichlet alpha)
  'mild': ('fedecho_mild', 0.1),
  'large': ('fedecho_large', 0.1),
  'Dir 0.3': ('fedecho_large', 0.3),
}


def _condition(method: spec.Method, condition: str) -> spec.Method:
  """``method`` under ``condition`` (a key of CONDITIONS), which its label names."""
  kind, alpha = CONDITIONS[condition]
  return dataclasses.replace(
    method,
    label=f'{method.label} ({condition})',
    fixed={**method.fixed, 'schedule.kind': kind, 'dirichlet_alpha': alpha},
  )


# Table 2 (CIFAR-10, mean of 3 seeds), columns large delay Dir (0.1), Dir (0.3), mild delay
# Dir (0.1), Dir (0.3): FedBuff 52.85, 51.44, 42.57, 41.60; CA2FL 55.33, 50.37, 42.99, 57.31;
# FedEcho (STL10) 77.81, 84.96, 77.99, 83.98 (FedEcho (CIFAR-100) 75.39, 84.11, 79.69,
# 83.74). The text reads them as "FedBuff and CA2FL suffer pronounced degradation under
# delays" and "FedEcho demonstrates greater stability", but at Dir 0.1 FedBuff and CA2FL
# score 10-12 points *higher* under the large delay than under the mild one, and FedEcho
# loses more than either from Dir 0.3 to Dir 0.1. The claims below say what the table
# shows; the delay-stability claims keep the text's direction but only count where the
# large delay does hurt the baseline (condition). FedEcho here distils on held-out
# Fashion-MNIST, read against the paper's FedEcho (STL10) row (as in Table 2 above).
STABILITY_QUOTE = (
  'In contrast, FedEcho demonstrates greater stability, yielding more consistent '
  'performance across delay and heterogeneity conditions.'
)


def _delay_claims() -> tuple:
  """Table 2 at Dir 0.1: the baselines under the mild vs the large delay."""
  return tuple(
    spec.Claim(
      'Table 2 (Dir 0.1)',
      f'{b} scores higher under the large delay than under the mild one, as in Table 2 (the '
      f'text says the delays degrade {b})',
      f'{b} (large)',
      f'{b} (mild)',
      quote=(
        'Both tables also show that existing asynchronous FL baselines, particularly FedBuff '
        f'and CA2FL, suffer from pronounced accuracy degradation under asynchronous delays. '
        f'[Table 2, {b}, Dir (0.1): large delay {large}, mild delay {mild}]'
      ),
      paper_effect=round((large - mild) / 100, 4),  # Table 2, Dir (0.1): large - mild
    )
    for b, large, mild in (('FedBuff', 52.85, 42.57), ('CA2FL', 55.33, 42.99))
  )


def _delay_stability() -> tuple:
  """Sec. 5.1: FedEcho loses less than FedBuff / CA2FL from the mild to the large delay,
  counted only where the large delay hurts the baseline."""
  return tuple(
    spec.Claim(
      'Sec. 5.1, Table 2 (Dir 0.1)',
      f'FedEcho is more stable than {b} across delay conditions (a smaller drop from the '
      f'mild to the large delay, where the large delay hurts {b})',
      'FedEcho (large)',
      f'{b} (large)',
      quote=STABILITY_QUOTE,
      # Table 2, Dir (0.1): drop of b minus drop of FedEcho (STL10, 77.99 -> 77.81); negative:
      # the table has b gaining under the large delay (the condition fails there).
      paper_effect=effect,
      baseline=('FedEcho (mild)', f'{b} (mild)'),
      condition=(f'{b} (mild)', f'{b} (large)'),
    )
    for b, effect in (('FedBuff', -0.1046), ('CA2FL', -0.1252))
  )


def _heterogeneity_claims() -> tuple:
  """Table 2, large delay: the drop from Dir 0.3 to Dir 0.1 of the baselines vs FedEcho."""
  return tuple(
    spec.Claim(
      'Table 2 (large delay)',
      f'{b} loses less than FedEcho from Dirichlet 0.3 to 0.1 (large delay), as in Table 2 '
      '(the text calls FedEcho the more stable across heterogeneity)',
      f'{b} (large)',
      'FedEcho (large)',
      quote=STABILITY_QUOTE
      + f' [Table 2, large delay, Dir (0.3) -> Dir (0.1): {b} {dir3} -> {dir1}, FedEcho '
      '(STL10) 84.96 -> 77.81]',
      # Table 2: drop of FedEcho (STL10) 0.0715 - drop of b (negative: b gains)
      paper_effect=round(0.0715 - (dir3 - dir1) / 100, 4),
      baseline=(f'{b} (Dir 0.3)', 'FedEcho (Dir 0.3)'),
    )
    for b, dir3, dir1 in (('FedBuff', 51.44, 52.85), ('CA2FL', 50.37, 55.33))
  )


CONDITIONS_EXP = spec.Experiment(
  key='conditions',
  title='Table 2 / Sec. 5: degradation under delays and label skew (mild vs large delay, '
  'Dir 0.3 vs 0.1)',
  ref='Table 2, Sec. 5',
  **TEXT['conditions'],
  base=spec.keeping(scaled, 'schedule.kind', 'dirichlet_alpha'),
  methods=tuple(
    _condition(method, condition)
    for method in (_fedecho('FedEcho'), *BASELINES)
    for condition in CONDITIONS
  ),
  claims=_delay_claims() + _delay_stability() + _heterogeneity_claims(),
)

# The same check when the stragglers are the largest clients: Table 1's categories with a
# small gamma (the paper: "a smaller gamma ties runtime more strongly to the sample count";
# it gives no value). Under Dirichlet 0.1 the five largest clients hold a large share of the
# data, much of it of labels few others own, so their rare, stale reports may cost accuracy.
STRAGGLER_GAMMA = 0.1

DELAY_LARGEST = dataclasses.replace(
  DELAY,
  key='delay_largest',
  title='The condition when the largest clients are the stragglers (gamma = 0.1)',
  **TEXT['delay_largest'],
  base=spec.keeping(scaled, 'schedule.kind'),
  methods=(
    DELAY.methods[0],
    dataclasses.replace(
      DELAY.methods[1],
      fixed={**DELAY.methods[1].fixed, 'schedule.straggler_gamma': STRAGGLER_GAMMA},
    ),
  ),
  claims=tuple(
    dataclasses.replace(c, text=c.text.replace(')', ', the largest clients long)'), added=True)
    for c in DELAY.claims
  ),
)


PAPER = spec.Paper(
  key='fedecho',
  number='002',
  citation=(
    'Wang, Ma, Chen, *Stragglers Can Contribute More: Uncertainty-Aware Distillation for '
    'Asynchronous Federated Learning*'
  ),
  setting=(TEXT['setting']),
  experiments=(DELAY, DELAY_K20, DELAY_LARGEST, TABLE2, TABLE7, CONDITIONS_EXP),
)
