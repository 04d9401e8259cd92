"""FedGM reproduction (paper 003: Sun, Wu, Huang, Zhang, "On the Role of Server Momentum").

Sec. 6.1 / App. H.1 Table 1: 100 clients, participation 0.05 (5 per synchronous
round), Dirichlet 0.5, 3 local epochs of SGD at eta_l = 0.01, 500 rounds, grid
eta in {0.5, 1.0, ..., 5.0}, beta and nu in {0.7, 0.9, 0.95}. FedAvg and FedAvgM are
FedGM at nu = 0 and nu = 1 (Sec. 3), so all three run the same server code.
"""

import dataclasses

from afl_jax.reproduction import spec

ROUNDS = 60


# The confirmatory test (issue 49): fresh test seeds, none of which an earlier test of the
# experiment used, for the experiments whose grid or seeds changed after a look at their
# test seeds (``looked``: the seeds looked at before).
CONFIRM = tuple(range(100, 110))
LOOKED = tuple(range(3, 13))


def scaled(c):
  """configs/fmnist.py:fedgm (FMNIST, MLP, 10k samples) + a validation split, 60 rounds."""
  c.num_rounds = ROUNDS
  c.eval_every = 5
  c.validation_size = 2000
  c.eval_train_samples = 1000


DATA = (
  'Fashion-MNIST, MLP 784-200-200-10, 10,000 training samples of which 2,000 are the '
  'validation split'
)
# The synchronous setting (configs/fmnist.py:fedgm), shared by the first two experiments.
SYNC_SETTING = (
  'synchronous rounds of 5 of 100 clients (Dirichlet 0.5), 3 local epochs of batch 32 at '
  f'eta_l = 0.01, {DATA}, {ROUNDS} rounds, evaluation every 5 rounds'
)

# "Only marginally better": by less than 2 points of test accuracy (this project's bound;
# the paper gives no number).
MARGINAL = 0.02

SYNC = spec.Experiment(
  key='sync',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Synchronous server momentum: FedGM vs FedAvgM vs FedAvg, and the server rate',
  ref='Sec. 6.1, Fig. 1(a,b), App. H.2 Figs. 3, 5-6; Remark 4.5',
  setting=f'configs/fmnist.py:fedgm: {SYNC_SETTING} on the full test set.',
  base=scaled,
  methods=(
    spec.Method(
      'FedAvg',
      'fmnist:fedgm',
      grid={'hparams.server_lr': (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0)},
      fixed={'hparams.nu': 0.0},
    ),
    spec.Method(
      'FedAvgM',
      'fmnist:fedgm',
      grid={'hparams.server_lr': (1.0, 3.0, 5.0), 'hparams.beta': (0.7, 0.9, 0.95)},
      fixed={'hparams.nu': 1.0},
    ),
    spec.Method(
      'FedGM',
      'fmnist:fedgm',
      grid={'hparams.server_lr': (1.0, 3.0, 5.0), 'hparams.nu': (0.7, 0.9, 0.95)},
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
      'FedAvgM is only marginally better than FedAvg in test accuracy (better, by less than '
      '2 points)',
      'FedAvgM',
      'FedAvg',
      quote=(
        'We observe that though FedAvgM converges faster than FedAvg, it is only marginally '
        'better in terms of testing.'
      ),
      upper=MARGINAL,
      restated=(
        '"only marginally" is tested too: FedAvgM better and by less than 2 points (a bound '
        "of this project's: the paper gives no number), each part adjusted on its own, "
        'where only "better" was tested.'
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
      outside="an extrapolation of this project's: the paper runs FedAvg at eta <= 3 only",
    ),
  ),
  deviations=(
    'Remark 4.5 is scored as "FedAvg diverges at eta = 3" (a non-finite loss on every test '
    'seed, App. H.2 Fig. 5) and "FedGM beats FedAvg at eta = 3" (Figs. 5-6); "FedGM beats '
    'FedAvg at eta = 5" is an extrapolation (the paper runs FedAvg at eta <= 3 only) and is '
    'scored outside the paper tally.',
    'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet/VGG; 10k training samples; '
    f'{ROUNDS} instead of 500 rounds.',
    'Grid budget of 9 settings per method (the paper sweeps eta in 10 values x beta x nu): '
    'FedAvg eta in {0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 5}; FedAvgM eta in {1, 3, 5} x beta in '
    '{0.7, 0.9, 0.95}; FedGM eta in {1, 3, 5} x nu in {0.7, 0.9, 0.95} at beta = 0.9 (the '
    "paper's beta and nu values).",
    'Settings are selected on a held-out validation split (the paper does not say how it selects).',
  ),
  extended=(
    'a first run gave 6 settings per method (FedAvgM beta and FedGM nu in {0.7, 0.9}, '
    'FedAvg eta in {0.5, 1, 2, 3, 4, 5}) and, on test seeds 3-12, "FedGM outperforms '
    'FedAvgM" was decided against FedAvgM\'s beta on its high edge (0.9); the grids were '
    "extended to the paper's third value 0.95 (and FedAvg to 9 values, the same budget), "
    'the selection ran again and the tests again on seeds 3-12 (2026-11-26).'
  ),
  edges_kept={
    'FedGM': "eta in {1, 3, 5} and nu in {0.7, 0.9, 0.95} reach the top of the paper's own "
    'grid (eta 0.5-5.0, nu up to 0.95, App. H.1): not extended past it',
  },
)


def constant_fedgm(label: str, lrs: tuple) -> spec.Method:
  """Synchronous FedGM at one eta of ``lrs`` for the whole run, beta = nu = 0.9."""
  return spec.Method(
    label, 'fmnist:fedgm', {'hparams.server_lr': lrs}, {'hparams.beta': 0.9, 'hparams.nu': 0.9}
  )


# Sec. 6.2, Fig. 2: the paper's stage ends (rounds 143 and 429 of 500, stage lengths in
# the ratio 1 : 2 : 4 so that W_2 = T_s eta_s is the same in every stage) scaled by
# ROUNDS / 500: stages of 17, 34 and 68 rounds, the last cut to 9 by the end of the run
# (the paper's third stage is cut to 71 of 572 rounds in the same way).
STAGE_LENGTHS = (17, 34, 68)
# Fig. 2's schedule is eta_1 = 2 halved at each stage end; the grid scales it.
# The 4th value (x4) extends both grids past the top edge both had selected on {1, 2, 4}.
STAGEWISE_LRS = ((1.0, 0.5, 0.25), (2.0, 1.0, 0.5), (4.0, 2.0, 1.0), (8.0, 4.0, 2.0))
CONSTANT_LRS = (1.0, 2.0, 4.0, 8.0)  # the same levels as the schedules' eta_1

MULTISTAGE = spec.Experiment(
  key='multistage',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Multistage FedGM vs constant-eta FedGM',
  ref='Sec. 6.2, Fig. 2; App. H.3',
  setting=(
    'The setting of the synchronous experiment above: configs/fmnist.py:multistage_fedgm '
    f'and configs/fmnist.py:fedgm, {SYNC_SETTING}. Multistage FedGM (Alg. 3): stages of '
    f'{STAGE_LENGTHS[0]}, {STAGE_LENGTHS[1]} and {STAGE_LENGTHS[2]} rounds (the last cut '
    f'to {ROUNDS - STAGE_LENGTHS[0] - STAGE_LENGTHS[1]} by the end of the run), eta halved '
    'at each stage end, beta = 0.9, nu_s = (0.25, 0.5, 1.0) so that constraint (3) holds '
    '(W_1 = eta_s beta nu_s / (1 - beta) and W_2 = T_s eta_s equal across stages). '
    'Constant-eta FedGM: one (eta, beta = 0.9, nu = 0.9) for the whole run.'
  ),
  base=scaled,
  methods=(
    spec.Method(
      'Multistage FedGM',
      'fmnist:multistage_fedgm',
      grid={'hparams.server_lrs': STAGEWISE_LRS},
      fixed={'hparams.stage_lengths': STAGE_LENGTHS},
    ),
    constant_fedgm('FedGM (constant eta)', CONSTANT_LRS),
  ),
  # "no matter what constant eta it takes": one claim per constant eta of the grid, the
  # multistage schedule at its validation-selected eta_1 throughout (``at`` restricts
  # only the constant-eta method, the one that sweeps server_lr).
  claims=tuple(
    spec.Claim(
      'Sec. 6.2, Fig. 2',
      f'Multistage FedGM is better than single-stage FedGM at constant eta = {eta:g}',
      'Multistage FedGM',
      'FedGM (constant eta)',
      quote=(
        'we observe multistage FedGM is better than single-stage FedGM, no matter what '
        'constant eta it takes. ... Multistage is also superior to its counterpart in testing.'
      ),
      at={'hparams.server_lr': eta},
      restated=(
        'scored against every constant eta of the grid (one claim each, multistage at its '
        'validation-selected schedule), where it was scored against the validation-'
        'selected constant eta only'
      ),
    )
    for eta in CONSTANT_LRS
  ),
  deviations=(
    f'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet; 10k training samples; {ROUNDS} '
    'instead of 500 rounds, with the stage ends scaled in proportion (17 and 51 instead '
    'of 143 and 429).',
    'Grid budget 4 per method. Fig. 2 runs one schedule, (2.0, 1.0, 0.5); here it is '
    "scaled by {1/2, 1, 2, 4} (eta_1 in {1, 2, 4, 8}, the second is the paper's) and the "
    'constant-eta FedGM takes eta in {1, 2, 4, 8}, the same levels. The paper does not say '
    'which beta, nu its single-stage curves use; here beta = nu = 0.9, the synchronous '
    "experiment's validation-selected values.",
    'Fig. 2 changes beta by Eq. (3); configs/fmnist.py:multistage_fedgm keeps beta = 0.9 '
    'and raises nu_s instead (both satisfy constraint (3)).',
    'Settings are selected on a held-out validation split.',
    '"No matter what constant eta it takes" is scored against each constant eta of the '
    'grid, one claim each (the multistage schedule at its validation-selected eta_1 in '
    'all four; Fig. 2 likewise runs one schedule against several constant etas), where '
    'a single claim was scored against the validation-selected constant eta only. On the '
    'selection seeds of the 3-value grid the multistage runs led at round 20 (the early '
    'large rate) but ended below the constant run at eta = eta_1: at 60 rounds the late '
    'small-rate stages that Fig. 2 credits for the gain have little to exploit.',
  ),
  extended=(
    'the first grids, {1, 2, 4} (eta_1 of the schedule, and the constant eta), left both '
    'methods on their top edge with test seeds 3-12 looked at; both gained one value (8), '
    'the selection ran again and the tests again on seeds 3-12 (2026-11-26).'
  ),
  edges_kept={
    'FedGM (constant eta)': 'extended once already after a test look (the bound of one '
    'extension per edge on 2 shared cores); every claim also compares the multistage '
    'schedule with each constant eta of the grid, 8 included',
  },
)


def autonomous(window: int):
  """``scaled`` (for the ideal FedGM only its fields apply) + App. H.1's staleness window."""
  return spec.with_fields(scaled, {'schedule.window': window})


# Around eta = 5 (see AUTONOMOUS_DEVIATIONS); 20 extends {2.5, 5, 10}, on whose top edge
# Autonomous FedAvg was selected, and the ideal FedGM takes as many values (10 extends
# the synchronous grid {1, 3, 5}, on whose top edge it was selected).
AUTONOMOUS_LRS = (2.5, 5.0, 10.0, 20.0)
IDEAL_LRS = (1.0, 3.0, 5.0, 10.0)


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
    methods += (constant_fedgm('Ideal FedGM', IDEAL_LRS),)
  return methods


def autonomous_setting(window: int) -> str:
  return (
    'configs/fmnist.py:autonomous_fedgm (Alg. 4): at every server step 5 of 100 clients '
    f'(Dirichlet 0.5) report; each started from a global model drawn uniformly from the '
    f'last {window} versions and ran a number of local epochs drawn from {{1, ..., 6}} '
    '(batch 32, eta_l = 0.01; an epoch is 1-7 steps, ~3 for the median client, so '
    'K_{t,i} is between 1 and ~40, about 10 on average), and sends Delta / K_{t,i}. '
    f'Autonomous FedAvg is the same with nu = 0. {DATA}, {ROUNDS} server steps, '
    'evaluation every 5 steps.'
  )


AUTONOMOUS_DEVIATIONS = (
  f'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet; 10k training samples; {ROUNDS} '
  'instead of 500 server steps.',
  'beta = nu = 0.9 fixed for every FedGM (the synchronous '
  "experiment's validation-selected values). Two grids "
  'were tried first and stopped (sweeps incomplete, no claim scored) because they left '
  'Autonomous FedGM on an edge: a K-scaled eta in {5, 15, 45} (~ mean K_{t,i} x '
  '{0.5, 1.5, 4.5}, since Alg. 4 divides each update by K_{t,i}; Autonomous FedGM ended '
  'at 0.51-0.69 test accuracy at eta = 15 and 45 vs 0.72-0.73 at eta = 5, and '
  'Autonomous FedAvg at eta = 15 was behind its eta = 5 runs after 20 steps), and the '
  "paper's range, eta in {0.5, 1.5, 5} (Autonomous FedGM 0.56, 0.69, 0.73 in mean; "
  'Autonomous FedAvg at eta = 0.5 ~0.51 after 40 steps): at 60 steps both autonomous '
  "methods are best at or just above the top of the paper's range.",
  'Settings are selected on a held-out validation split (the paper reports the best '
  'final test accuracy of its grid).',
)

# "Within a small margin": Autonomous FedGM needs at most 1.5x the ideal FedGM's server
# steps to the target (this project's reading; the paper gives no number).
SLOWDOWN_MARGIN = 1.5
SLOWDOWN_QUOTE = (
  'Though Autonomous FedGM suffers a slowdown compared to the ideal FedGM, it is '
  'within a small margin'
)

AUTONOMOUS = spec.Experiment(
  key='autonomous',
  test_seeds=tuple(range(100, 150)),
  looked=tuple(range(3, 63)),
  title='Autonomous FedGM vs Autonomous FedAvg vs ideal FedGM (staleness window 5)',
  ref='Sec. 6.3, Fig. 1(c,d), App. H.1',
  setting=autonomous_setting(5)
  + ' Ideal FedGM: synchronous rounds of 5 clients, every client 3 local epochs from the '
  'current model (configs/fmnist.py:fedgm).',
  base=autonomous(5),
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
      'Autonomous FedGM suffers a slowdown against the ideal FedGM, within a small margin '
      "(more server steps to the target, at most 1.5x the ideal's)",
      'Ideal FedGM',
      'Autonomous FedGM',
      quote=SLOWDOWN_QUOTE,
      metric='steps_to_target',
      upper=SLOWDOWN_MARGIN,
      restated=(
        'one statement, scored on the server steps to the target (Fig. 1(c,d) plot curves '
        'over rounds: a slowdown is a delay along them) with the small margin at most 1.5x '
        "the ideal FedGM's steps (this project's: the paper gives no number), where it was "
        'two claims on final accuracy (the ideal FedGM ends higher; the two within 2 points).'
      ),
    ),
  ),
  deviations=AUTONOMOUS_DEVIATIONS
  + (
    'Grid budget 4 per method: the autonomous methods share eta in {2.5, 5, 10, 20}; '
    'ideal FedGM takes eta in {1, 3, 5, 10}.',
    'The paper states a slowdown "within a small margin" and gives no number: scored as '
    'one claim on the server steps to the target (the default target, from validation), '
    "Autonomous FedGM slower than the ideal FedGM by at most 1.5x the ideal's steps.",
    'Scored on test seeds 100-149, none of which was looked at: on seeds 3-12, Autonomous '
    'FedGM - Autonomous FedAvg was +0.019 [-0.013, +0.051] (its power column asked for about '
    '46 seeds), and seeds 13-62, drawn after that look, were looked at before the grid was '
    'extended.',
  ),
  extended=(
    'on the 3-value grids (eta in {2.5, 5, 10} for the autonomous methods, {1, 3, 5} for '
    'the ideal FedGM) Autonomous FedAvg was selected at eta = 10, the top edge, while '
    '"Autonomous FedGM outperforms Autonomous FedAvg" agreed (+0.029 [+0.013, +0.044]) on '
    'test seeds 13-62; every method gained one value past the top (20; 10 for the ideal '
    'FedGM), the selection ran again and the tests again on seeds 13-62 (2026-11-26). '
    'Autonomous FedAvg selects eta = 10 again, now inside (its test runs are the same '
    'computation, kept); the ideal FedGM moves to eta = 10, the top of its grid.'
  ),
  edges_kept={
    'Ideal FedGM': 'the reference the slowdown is measured against, extended once already '
    'after a test look (the bound of one extension per edge on 2 shared cores); a decided '
    'verdict against it names the edge'
  },
  second_look=(
    'Test seeds 13-62 were drawn after seeds 3-12 left Autonomous FedGM - Autonomous '
    'FedAvg undecided (+0.019 [-0.013, +0.051]): fresh seeds, but a second look. The '
    'confirmatory test runs on seeds 100-149, none of which was looked at.'
  ),
)

# Window 10 tunes on the two rates the window-5 sweeps selected, 2.5 (Autonomous FedGM
# selected 5, the low edge of {5, 10}) and 1.25 (it then selected 2.5, the low edge of
# {2.5, 5, 10}).
W10_LRS = (1.25, 2.5, 5.0, 10.0)

AUTONOMOUS_W10 = spec.Experiment(
  key='autonomous_w10',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Autonomous FedGM vs Autonomous FedAvg (staleness window 10)',
  ref='App. H.4, Fig. 9',
  setting=autonomous_setting(10),
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
  deviations=AUTONOMOUS_DEVIATIONS
  + (
    'The ideal FedGM reference of Fig. 9 is the one of the window-5 experiment above.',
    'Grid budget 4 per method; eta in {1.25, 2.5, 5, 10}: the two rates the window-5 '
    'experiment selected on its first grid (Autonomous FedGM eta = 5, Autonomous FedAvg '
    'eta = 10) and two below them (see below).',
  ),
  extended=(
    'on {5, 10} Autonomous FedGM selected the low edge and the test ran on seeds 3-12: 2.5 '
    'was added; on {2.5, 5, 10} it selected the low edge again while "Autonomous FedGM '
    'outperforms Autonomous FedAvg" disagreed (-0.023 [-0.038, -0.008]) on seeds 3-12: 1.25 '
    'was added; each time the selection ran again and the tests again on seeds 3-12 '
    '(2026-11-25/26).'
  ),
)

PAPER_ROUNDS = 500  # the paper's T (App. H.1)

SYNC_T500 = dataclasses.replace(
  SYNC,
  key='sync_t500',
  beside='sync',
  looked=(),
  title=SYNC.title + f" (the paper's {PAPER_ROUNDS} rounds)",
  setting=SYNC.setting.replace(
    f'{ROUNDS} rounds, evaluation every 5 rounds',
    f"{PAPER_ROUNDS} rounds (the paper's), evaluation every 25 rounds",
  ),
  base=spec.with_fields(scaled, {'num_rounds': PAPER_ROUNDS, 'eval_every': 25}),
  claims=tuple(
    dataclasses.replace(
      c,
      ref=f'{c.ref} (T = {PAPER_ROUNDS})',
      outside=c.outside
      or f"the same statement at the paper's T = {PAPER_ROUNDS}, shown beside the 2-core "
      'run the tally scores',
    )
    for c in SYNC.claims
  ),
  extended='',
  edges_kept={},
  deviations=tuple(d.replace(f'; {ROUNDS} instead of 500 rounds', '') for d in SYNC.deviations)
  + (
    'Declared for an accelerator, not run on 2 CPU cores (run=False: about eight times '
    'the 60-round experiment, about 4.5 h there): `python scripts/reproduce.py '
    '--paper=fedgm --only=sync_t500`.',
  ),
  run=False,
)

PAPER = spec.Paper(
  key='fedgm',
  number='003',
  citation='Sun, Wu, Huang, Zhang, *On the Role of Server Momentum in Federated Learning*',
  setting=(
    'ResNet/VGG on CIFAR-10, 100 clients, participation 0.05, Dirichlet 0.5, 3 local '
    'epochs, eta_l = 0.01, 500 rounds, eta in {0.5, ..., 5.0}, beta and nu in '
    '{0.7, 0.9, 0.95} (App. H.1, Table 1).'
  ),
  experiments=(SYNC, MULTISTAGE, AUTONOMOUS, AUTONOMOUS_W10, SYNC_T500),
)
