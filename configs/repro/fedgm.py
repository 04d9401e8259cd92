"""FedGM reproduction (paper 003: Sun, Wu, Huang, Zhang, "On the Role of Server Momentum").

Sec. 6.1 / App. H.1 Table 1: 100 clients, participation 0.05 (5 per synchronous
round), Dirichlet 0.5, 3 local epochs of SGD at eta_l = 0.01, 500 rounds, grid
eta in {0.5, 1.0, ..., 5.0}, beta and nu in {0.7, 0.9, 0.95}. FedAvg and FedAvgM are
FedGM at nu = 0 and nu = 1 (Sec. 3), so all three run the same server code.
"""

import dataclasses

from afl_jax.reproduction import spec

TEXT = spec.prose(__file__)  # the pages' prose: settings and deviations

ROUNDS = 60


def scaled(c):
  """configs/fmnist.py:fedgm (FMNIST, MLP, 10k samples) + a validation split, 60 rounds."""
  c.num_rounds = ROUNDS
  c.eval_every = 5
  c.validation_size = 2000
  c.eval_train_samples = 1000


# The synchronous setting (configs/fmnist.py:fedgm), shared by the first two experiments.

SYNC = spec.Experiment(
  key='sync',
  title='Synchronous server momentum: FedGM vs FedAvgM vs FedAvg, and the server rate',
  ref='Sec. 6.1, Fig. 1(a,b), App. H.2 Figs. 3, 5-6; Remark 4.5',
  **TEXT['sync'],
  base=scaled,
  methods=(
    spec.Method(
      'FedAvg',
      'fmnist:fedgm',
      grid={'hparams.server_lr': (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)},
      fixed={'hparams.nu': 0.0},
    ),
    spec.Method(
      'FedAvgM',
      'fmnist:fedgm',
      grid={'hparams.server_lr': (1.0, 3.0, 5.0), 'hparams.beta': (0.7, 0.9)},
      fixed={'hparams.nu': 1.0},
    ),
    spec.Method(
      'FedGM',
      'fmnist:fedgm',
      grid={'hparams.server_lr': (1.0, 3.0, 5.0), 'hparams.nu': (0.7, 0.9)},
      fixed={'hparams.beta': 0.9},
    ),
  ),
  # The paper reports curves only (Figs. 1-9, no table of results): paper_effect None.
  claims=(
    *(
      spec.Claim(
        f'Sec. 6.1, Fig. 1(a,b); App. H.2 {figs}',
        f'FedGM outperforms {worse} in test accuracy',
        'FedGM',
        worse,
        quote='FedGM, in contrast, outperforms FedAvgM and FedAvg in both measures.',
      )
      for worse, figs in (('FedAvgM', 'Fig. 3'), ('FedAvg', 'Figs. 3-4'))
    ),
    spec.Claim(
      'Sec. 6.1, Fig. 1(b)',
      'FedAvgM is (only marginally) better than FedAvg in test accuracy',
      'FedAvgM',
      'FedAvg',
      quote=(
        'We observe that though FedAvgM converges faster than FedAvg, it is only marginally '
        'better in terms of testing.'
      ),
    ),
    spec.Claim(
      'Remark 4.5, App. H.2 Fig. 5',
      'FedAvg diverges at eta = 3 (a non-finite loss on every test seed; shown beside FedGM '
      'at eta = 3)',
      'FedAvg',
      'FedGM',
      quote=(
        'We could see FedAvg experiences an unstable convergence even when eta=2.0 and '
        'completely divergent when eta=3.0.'
      ),
      at={'hparams.server_lr': 3.0},
      metric='diverged',
      kind='on_seeds',
    ),
    spec.Claim(
      'Remark 4.5, App. H.2 Figs. 5-6',
      'at eta = 3 FedGM beats FedAvg (Fig. 6 has FedGM converging at eta = 3, Fig. 5 FedAvg '
      'diverging)',
      'FedGM',
      'FedAvg',
      quote=(
        'with same eta_l, FedGM could sustain a much larger eta, while FedAvg diverges very '
        'easily with a moderately large eta.'
      ),
      at={'hparams.server_lr': 3.0},
    ),
    spec.Claim(
      'Remark 4.5, App. H.2 Fig. 6 (extrapolated)',
      'at eta = 5 FedGM beats FedAvg (an extrapolation of Remark 4.5: the paper runs FedGM '
      'at eta = 5 but FedAvg only at eta = 1, 2, 3)',
      'FedGM',
      'FedAvg',
      at={'hparams.server_lr': 5.0},
      added=True,
    ),
  ),
)

# Sec. 6.2, Fig. 2: the paper's stage ends (rounds 143 and 429 of 500, stage lengths in
# the ratio 1 : 2 : 4 so that W_2 = T_s eta_s is the same in every stage) scaled by
# ROUNDS / 500: stages of 17, 34 and 68 rounds, the last cut to 9 by the end of the run
# (the paper's third stage is cut to 71 of 572 rounds in the same way).
STAGE_LENGTHS = (17, 34, 68)
# Fig. 2's schedule is eta_1 = 2 halved at each stage end; the grid scales it.
STAGEWISE_LRS = ((1.0, 0.5, 0.25), (2.0, 1.0, 0.5), (4.0, 2.0, 1.0))

MULTISTAGE = spec.Experiment(
  key='multistage',
  title='Multistage FedGM vs constant-eta FedGM',
  ref='Sec. 6.2, Fig. 2; App. H.3',
  **TEXT['multistage'],
  base=scaled,
  methods=(
    spec.Method(
      'Multistage FedGM',
      'fmnist:multistage_fedgm',
      grid={'hparams.server_lrs': STAGEWISE_LRS},
      fixed={'hparams.stage_lengths': STAGE_LENGTHS},
    ),
    spec.Method(
      'FedGM (constant eta)',
      'fmnist:fedgm',
      grid={'hparams.server_lr': (1.0, 2.0, 4.0)},
      fixed={'hparams.beta': 0.9, 'hparams.nu': 0.9},
    ),
  ),
  claims=(
    spec.Claim(
      'Sec. 6.2, Fig. 2',
      'Multistage FedGM is better than single-stage FedGM, no matter what constant eta '
      'it takes (here: than the validation-selected constant eta)',
      'Multistage FedGM',
      'FedGM (constant eta)',
      quote=(
        'we observe multistage FedGM is better than single-stage FedGM, no matter what '
        'constant eta it takes. ... Multistage is also superior to its counterpart in testing.'
      ),
    ),
  ),
)


def autonomous(window: int):
  """``scaled`` (for the ideal FedGM only its fields apply) + App. H.1's staleness window."""
  return spec.with_fields(scaled, {'schedule.window': window})


AUTONOMOUS_LRS = (2.5, 5.0, 10.0)  # around eta = 5: fedgm.toml, autonomous, says why


def autonomous_methods(ideal: bool, lrs=AUTONOMOUS_LRS) -> tuple:
  methods = tuple(
    spec.Method(
      label,
      'fmnist:autonomous_fedgm',
      grid={'hparams.server_lrs': tuple((v,) for v in lrs)},
      fixed={'hparams.betas': (0.9,), 'hparams.nus': (nu,)},
    )
    for label, nu in (('Autonomous FedGM', 0.9), ('Autonomous FedAvg', 0.0))
  )
  if ideal:
    methods += (
      spec.Method(
        'Ideal FedGM',
        'fmnist:fedgm',
        grid={'hparams.server_lr': (1.0, 3.0, 5.0)},
        fixed={'hparams.beta': 0.9, 'hparams.nu': 0.9},
      ),
    )
  return methods


AUTONOMOUS = spec.Experiment(
  key='autonomous',
  title='Autonomous FedGM vs Autonomous FedAvg vs ideal FedGM (staleness window 5)',
  ref='Sec. 6.3, Fig. 1(c,d), App. H.1',
  **TEXT['autonomous'],
  base=autonomous(5),
  test_seeds=tuple(range(13, 63)),  # 50 fresh seeds (see the last deviation)
  methods=autonomous_methods(ideal=True),
  claims=(
    spec.Claim(
      'Sec. 6.3, Fig. 1(c,d)',
      'Autonomous FedGM outperforms Autonomous FedAvg with system heterogeneity',
      'Autonomous FedGM',
      'Autonomous FedAvg',
      quote=(
        'We could observe Autonomous FedGM outperforms Autonomous FedAvg with system heterogeneity.'
      ),
    ),
    spec.Claim(
      'Sec. 6.3, Fig. 1(c,d)',
      'Autonomous FedGM suffers a slowdown compared to the ideal FedGM (ideal FedGM ends higher)',
      'Ideal FedGM',
      'Autonomous FedGM',
      quote=(
        'Though Autonomous FedGM suffers a slowdown compared to the ideal FedGM, it is '
        'within a small margin'
      ),
    ),
    spec.Claim(
      'Sec. 6.3, Fig. 1(c,d)',
      "Autonomous FedGM's slowdown is within a small margin: it matches the ideal FedGM in "
      'final accuracy within 2 points',
      'Ideal FedGM',
      'Autonomous FedGM',
      quote=(
        'Though Autonomous FedGM suffers a slowdown compared to the ideal FedGM, it is '
        'within a small margin'
      ),
      kind='equivalent',
      margin=0.02,
    ),
  ),
)

# Window 10 tunes on the two rates the window-5 sweeps selected (time: 2 cores).
W10_LRS = (5.0, 10.0)

AUTONOMOUS_W10 = spec.Experiment(
  key='autonomous_w10',
  title='Autonomous FedGM vs Autonomous FedAvg (staleness window 10)',
  ref='App. H.4, Fig. 9',
  **TEXT['autonomous_w10'],
  base=autonomous(10),
  methods=autonomous_methods(ideal=False, lrs=W10_LRS),
  claims=(
    spec.Claim(
      'App. H.4, Fig. 9',
      'Autonomous FedGM outperforms Autonomous FedAvg (stale models from the last 10 versions)',
      'Autonomous FedGM',
      'Autonomous FedAvg',
      quote=(
        'we observe momentum is crucial as Autonomous FedGM outperforms Autonomous FedAvg '
        'with system heterogeneity.'
      ),
    ),
  ),
)

PAPER_ROUNDS = 500  # the paper's T (App. H.1)

SYNC_T500 = dataclasses.replace(
  SYNC,
  key='sync_t500',
  title=SYNC.title + f" (the paper's {PAPER_ROUNDS} rounds)",
  **TEXT['sync_t500'],
  base=spec.with_fields(scaled, {'num_rounds': PAPER_ROUNDS, 'eval_every': 25}),
  claims=tuple(dataclasses.replace(c, ref=f'{c.ref} (T = {PAPER_ROUNDS})') for c in SYNC.claims),
  run=False,
)

PAPER = spec.Paper(
  key='fedgm',
  number='003',
  citation='Sun, Wu, Huang, Zhang, *On the Role of Server Momentum in Federated Learning*',
  setting=(TEXT['setting']),
  experiments=(SYNC, MULTISTAGE, AUTONOMOUS, AUTONOMOUS_W10, SYNC_T500),
)
