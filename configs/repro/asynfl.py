"""AsynFL reproduction (paper 004: Yang, Hou, Wu, "Convergence Analysis of AFL with
Gradient Compression").

Sec. V (FMNIST row): MLP, n = 100 clients, Dirichlet(0.4), Normal job times, the server
waits a fixed window per round and aggregates whoever finished (eq. 5 divides by n);
Table III: upload (GB) to 75% test accuracy; Fig. 5: Sign / Top-k without EF, IID vs
non-IID. Scaled here to configs/fmnist.py, setting ASYNFL (20 clients, 12,000
samples, K = 5, a 5 s window over Normal(10, 3) s jobs) with a validation split.
"""

import dataclasses

from afl_jax.reproduction import spec

ROUNDS = 40
TARGET = 0.75  # Table III's FMNIST (MLP) target
# eta_l grid, budget 5 for every method (on 0.02-0.1 every method selected 0.1, the edge)
CLIENT_LRS = (0.02, 0.05, 0.1, 0.2, 0.4)
SIGN_SERVER_LRS = (0.0003, 0.001, 0.003, 0.01, 0.03)  # eta_g grid of the unscaled Sign


# The confirmatory test (issue 49): fresh test seeds, none of which an earlier test of the
# experiment used, for the experiments whose grid or seeds changed after a look at their
# test seeds (``looked``: the seeds looked at before).
CONFIRM = tuple(range(100, 110))
LOOKED = tuple(range(3, 13))


def scaled(c):
  """The shared scaled setting: a validation split, T = 40 rounds, evaluation every step."""
  c.num_rounds = ROUNDS
  c.eval_every = 1
  c.validation_size = 2000
  c.eval_train_samples = 1000


SETTING = (
  'configs/fmnist.py, setting ASYNFL: n = 20 clients, Dirichlet(0.4) over 12,000 '
  'Fashion-MNIST training samples of which 2,000 are the validation split, MLP '
  '784-200-200-10 (d = 199,210), K = 5 local SGD steps of batch 32, job times Normal(10, 3) '
  's; the AsynFL family waits a 5 s window per round (about 8 of 20 clients report, '
  f'continuous local training, eq. 5 divides by n, eta_g = 1); T = {ROUNDS} server steps, '
  'evaluation every step. FedBuff (configs/fmnist.py:fedbuff_asynfl): its event clock with '
  'the same job times, Mc = 12 jobs in flight, buffer M = 8 (about the same reports per '
  'server step), eta_g = 1. Uploads are counted in the bits each compressor sends (32-bit '
  'values, 18-bit indices, 32-bit norms/scales).'
)

DEVIATIONS = (
  'Scaled to a shared 2-core CPU: 20 clients instead of 100, 12k training samples, batch 32 '
  f'instead of 128, T = {ROUNDS} rounds; the paper gives neither K, the job-time '
  "distribution's parameters, the window nor FedBuff's Mc/M (ours above). Every method is "
  'tuned on the same eta_l grid {0.02, 0.05, 0.1, 0.2, 0.4} (the paper fixes eta_l = 0.01; '
  'a first run on 0.02-0.1 selected 0.1, its edge, for every method).',
  'Upload counts indices and norms, so the compression ratios the paper quotes (which count '
  'values only) are out of reach: top-3% costs 37.4 kB per report vs 796.8 kB dense (21x, '
  'not 48x), top3+Q4b 16.4 kB (49x), top3+Q2b 8.9 kB (89x). The "less upload" claims of '
  "the compressed variants are scored in the paper's direction, without a threshold; "
  "Table III's ratios (FMNIST row, values only: 24x for top-3%, 240x for top3+Q4b, 480x "
  'for top3+Q2b) are shown, not compared: other units.',
  'Top-k + QSGD uses the contraction of Definition 3, Q_s(Top_k(x)) / (1 + beta_{k,s}) '
  '(compressor option scaled=True), not the library default (the unscaled Q_s(Top_k(x))): '
  'Definition 3 defines every compressor of the analysis as a gamma-contraction and quotes '
  'gamma = k / (d (1 + beta_{k,s})) from Basu et al., which holds only for the scaled '
  'operator; the unscaled one expands (beta = 11 at b = 4 here) and diverged with EF on the '
  'single-seed page.',
  'Equal compute: continuous AsynFL trains every client K steps every round, FedBuff only '
  'the Mc jobs in flight; AsynFL (per-job) runs FedBuff-style jobs (K steps from the model '
  "the client last received) in AsynFL's window schedule, the same local steps per upload "
  'as FedBuff.',
  'AsynFLC(Q4b) is unbiased QSGD (b = 4 bits incl. the sign, s = 7 levels, one norm) '
  'without EF, as in Obs. 2; AsynFLC(top3) is Top-3% without EF (Obs. 3).',
  'Steps / MB to target are read at evaluations, every server step.',
)

# Sec. V-B's observations, quoted by the claims below. Table III gives the upload to 75%
# on FMNIST (MLP) in GB: FedBuff 0.48, AsynFL 0.48, AsynFLC(Q4b) 0.06, AsynFLC(top3) 0.05,
# AsynFLC-EF(top3) 0.02, (top3+Q4b) 0.002, (top3+Q2b) 0.001; every paper_effect below is
# from that row (values only, 100 clients: its GB are not this setting's MB, its ratios
# are comparable in kind; the 0.001-0.002 GB entries have one significant digit).
OBS1 = (
  'AsynFL and AsynFLC-EF achieve faster convergence rates and lower communication costs '
  'compared to FedBuff'
)
OBS1_TABLE = (
  'Moreover, as quantified in TABLE III, AsynFL and AsynFLC-EF require considerably lower '
  'communication costs.'
)
OBS2 = (
  'AsynFLC-EF achieves slightly higher convergence rates and higher communication '
  'efficiency than unbiased QSGD.'
)
OBS3 = (
  'AsynFLC achieves worse convergence performance than AsynFL under non-IID data, due to '
  'the lack of EF. AsynFLC with Top 3% shows unstable convergence compared to AsynFL and '
  'AsynFLC-EF'
)
OBS4 = 'AsynFLC-EF achieves a convergence rate comparable to that of AsynFL'
OBS5 = (
  'Furthermore, AsynFLC-EF achieves better accuracy with a substantial reduction in '
  'communication costs compared to AsynFL.'
)
OBS6 = (
  'even under non-IID data, partial participation, and asynchronous training '
  'environments, higher compression ratios do not compromise convergence speed or model '
  'accuracy.'
)
OBS8 = (
  'Data heterogeneity hampers the convergence of AsynFLC without EF. As observed, '
  'under non-IID data, AsynFLC using the Sign compressor fails to converge'
)
UPLOAD_MARGIN = 20.0  # MB; see the per-job AsynFL vs FedBuff upload claim
EQUAL_COMPUTE = (
  "a control of this project's: per-job AsynFL (FedBuff's local steps per upload), not a "
  'method of the paper'
)
# Top-3% + QSGD at 4 bits, as the contraction of Definition 3 (DEVIATIONS).
TOP3_Q4B = {'hparams.compressor': 'top_k_qsgd', 'hparams.bits': 4, 'hparams.scaled': True}


NONINFERIOR = (
  'scored as non-inferiority (the variant loses at most 2 points of final accuracy, a '
  "margin of this project's: the paper gives none), where it was a two-sided equivalence: "
  'the paper says "better accuracy" and "do not compromise ... model accuracy", one-sided.'
)
# Why a claim is scored outside the tally (each paper statement counts once there).
AT_ETA_G_1 = (
  'another reading: the variant at eta_g = 1, tuned on eta_l only; the tally scores this '
  'statement with eta_g tuned (the table3_q4b_eta_g experiment)'
)
UNSCALED = (
  "a contrast of this project's: the unscaled Q_s(Top_k(x)) is not a contraction "
  '(Definition 3); the tally scores the contraction'
)


def _matches(ref: str, label: str, outside: str = '') -> spec.Claim:
  """Obs. 5-6: ``label`` loses at most 2 points of final accuracy against AsynFL."""
  return spec.Claim(
    ref,
    f'{label} does not lose accuracy against AsynFL (final accuracy, non-inferior within 2 points)',
    label,
    'AsynFL',
    quote=OBS6,
    kind='noninferior',
    margin=0.02,
    outside=outside,
    restated=NONINFERIOR,
  )


UPLOAD_UNITS = (
  'Table III counts the bits of the uploaded values only; this project counts every bit '
  'sent, indices and norms too (top-3%: 37.4 kB a report against 796.8 kB dense, 21x where '
  "values only give 33x), so the paper's ratio is in other units"
)
CONSIDERABLY = (
  'scored in the paper\'s direction ("considerably lower"), without the threshold of this '
  "project's it had (10x less); Table III's ratio is shown, not compared (other units)."
)


def _less_upload(ref, label, than, gb, quote, outside='', of=0.48):
  """``label`` needs less upload than ``than`` to 75% (Table III, FMNIST: ``than``'s ``of``
  GB against ``label``'s ``gb``; the paper's ratio in other units, shown)."""
  ratio = round(of / gb)
  return spec.Claim(
    ref,
    f'{label} needs less upload than {than} to reach 75%',
    label,
    than,
    quote=quote,
    paper_effect=float(ratio),
    source=f'Table III, FMNIST (MLP) to 75%: {than} {of:g} / {label.split(",")[0]} {gb:g} GB '
    '(values only)',
    metric='mb_to_target',
    incomparable=UPLOAD_UNITS,
    outside=outside,
    restated=CONSIDERABLY,
  )


def _ef_claims(label: str, gb: float, outside: str = '') -> tuple:
  """Obs. 5-6 for the EF variant ``label``: it does not lose accuracy against AsynFL (Fig.
  3) and needs 10x less upload to 75% (Table III, FMNIST: AsynFL 0.48 GB, the variant
  ``gb``)."""
  return (
    _matches('Obs. 5-6, Fig. 3', label, outside),
    _less_upload('Obs. 5-6, Table III', label, 'AsynFL', gb, OBS5, outside),
  )


TABLE3 = spec.Experiment(
  key='table3',
  title='Table III / Figs. 1-3: FedBuff vs AsynFL vs AsynFLC(-EF), non-IID FMNIST',
  ref='Table III, Figs. 1-3, Obs. 1-6',
  setting=SETTING,
  base=scaled,
  methods=tuple(
    spec.Method(label, config, grid={'hparams.client_lr': CLIENT_LRS}, fixed=fixed)
    for label, config, fixed in (
      ('FedBuff', 'fmnist:fedbuff_asynfl', {}),
      ('AsynFL', 'fmnist:asynfl', {}),
      ('AsynFL (per-job)', 'fmnist:asynfl', {'hparams.local_training': 'per_job'}),
      ('AsynFLC(top3)', 'fmnist:asynflc', {}),
      (
        'AsynFLC(Q4b)',
        'fmnist:asynflc',
        {'hparams.compressor': 'qsgd', 'hparams.bits': 4, 'hparams.fraction': None},
      ),
      ('AsynFLC-EF(top3)', 'fmnist:asynflc_ef', {}),
      ('AsynFLC-EF(top3+Q4b)', 'fmnist:asynflc_ef', TOP3_Q4B),
      ('AsynFLC-EF(top3+Q2b)', 'fmnist:asynflc_ef', {**TOP3_Q4B, 'hparams.bits': 2}),
    )
  ),
  claims=(
    spec.Claim(
      'Obs. 1, Table III',
      'AsynFL needs less upload than FedBuff to reach 75%',
      'AsynFL',
      'FedBuff',
      quote=OBS1 + '. ' + OBS1_TABLE + ' [Table III, FMNIST (MLP, 75%): FedBuff 0.48, AsynFL '
      '0.48 GB; the 1.4x saving the text quotes is on CIFAR-10]',
      metric='mb_to_target',
      restated=(
        'scored in Obs. 1\'s direction (AsynFL lower), no margin: it was "the same upload as '
        "FedBuff (within 20 MB, a margin of this project's)\", read off Table III's tied "
        'FMNIST cell; the text says lower.'
      ),
    ),
    spec.Claim(
      'Obs. 1, Fig. 1',
      'AsynFL converges faster than FedBuff (server steps to 75%)',
      'AsynFL',
      'FedBuff',
      quote=OBS1,
      metric='steps_to_target',
    ),
    spec.Claim(
      'Obs. 1 (equal compute)',
      'AsynFL with per-job training needs the same upload as FedBuff to reach 75% (within 20 MB)',
      'AsynFL (per-job)',
      'FedBuff',
      metric='mb_to_target',
      kind='equivalent',
      margin=UPLOAD_MARGIN,
      outside=EQUAL_COMPUTE,
    ),
    spec.Claim(
      'Obs. 1 (equal compute)',
      'AsynFL with per-job training converges faster than FedBuff (steps to 75%)',
      'AsynFL (per-job)',
      'FedBuff',
      metric='steps_to_target',
      outside=EQUAL_COMPUTE,
    ),
    spec.Claim(
      'Obs. 1, Fig. 1',
      'AsynFLC-EF(top3) converges faster than FedBuff (steps to 75%)',
      'AsynFLC-EF(top3)',
      'FedBuff',
      quote=OBS1,
      metric='steps_to_target',
    ),
    _less_upload('Obs. 1, Table III', 'AsynFLC-EF(top3)', 'FedBuff', 0.02, OBS1_TABLE),
    _matches('Obs. 5-6, Figs. 1-2', 'AsynFLC-EF(top3)'),
    spec.Claim(
      'Obs. 4, Fig. 1',
      'AsynFLC-EF(top3) converges as fast as AsynFL (steps to 75%, within a factor 1.25)',
      'AsynFLC-EF(top3)',
      'AsynFL',
      quote=OBS4,
      metric='steps_to_target',
      kind='equivalent',
      margin=0.25,
      relative=True,
      restated=(
        "with a margin relative to AsynFL's steps (within a factor 1.25 either way, this "
        "project's: the paper gives none), where it was 8 steps on a base of about 13 (a 63% "
        'slowdown counted as comparable).'
      ),
    ),
    _less_upload('Obs. 5, Table III', 'AsynFLC-EF(top3)', 'AsynFL', 0.02, OBS5),
    *_ef_claims('AsynFLC-EF(top3+Q4b)', 0.002, AT_ETA_G_1),
    *_ef_claims('AsynFLC-EF(top3+Q2b)', 0.001, AT_ETA_G_1),
    spec.Claim(
      'Obs. 2, Table III',
      'AsynFLC-EF(top3) needs less upload than AsynFLC(Q4b) to reach 75%',
      'AsynFLC-EF(top3)',
      'AsynFLC(Q4b)',
      quote=OBS2,
      paper_effect=3.0,
      source='Table III, FMNIST (MLP) to 75%: AsynFLC(Q4b) 0.06 / AsynFLC-EF(top3) 0.02 GB '
      "(the text's 48.74x against 8.25x, about 5.9x, is CIFAR-10 with AlexNet)",
      metric='mb_to_target',
      incomparable=UPLOAD_UNITS,
    ),
    *(
      spec.Claim(
        'Obs. 3, Fig. 1',
        f'AsynFLC(top3) without EF converges worse than {than} (final accuracy)',
        better,
        'AsynFLC(top3)',
        quote=OBS3,
      )
      for than, better in (('with EF', 'AsynFLC-EF(top3)'), ('AsynFL', 'AsynFL'))
    ),
  ),
  deviations=DEVIATIONS,
  target=TARGET,
)


# eta_g grids, 3 values each. The contraction Q_s(Top_k(x)) / (1 + beta) shrinks every
# upload by 1 + beta_{k,s} = 12 for top-3% + Q4b here, 78 for top-3% + Q2b (s = 1): each
# contraction grid runs from 1 up to its factor (selected inside: 4 and 9).
SERVER_LRS = (1.0, 4.0, 12.0)  # 1 + beta_{k,s} = 12 for top-3% + Q4b here
Q2B_SERVER_LRS = (1.0, 9.0, 78.0)  # 1 + beta_{k,s} = 78 for top-3% + Q2b (s = 1)
# AsynFL has no contraction to undo; on {1, 4, 12} it was selected at 1, the low edge,
# behind a decided verdict: its window moves one step down (12, far below, leaves).
ASYNFL_SERVER_LRS = (0.3, 1.0, 4.0)
# The unscaled Q_s(Top_k(x)) is 12x the contraction: on {1, 4, 12} every setting collapsed
# (validation 0.10) and it was selected at 1, the low edge, behind a decided contrast; on
# {0.1, 0.3, 1} (about the contraction's grid / 12) at 0.1, the low edge again (0.15); on
# {0.01, 0.03, 0.1} at 0.1, the high edge. The window centred on it:
UNSCALED_SERVER_LRS = (0.03, 0.1, 0.3)


# Table III's setting at eta_l = 0.1 (every method's table3 selection), eta_g tuned.
eta_g = spec.with_fields(scaled, {'hparams.client_lr': 0.1})


def _q4b(label: str, contraction: bool) -> spec.Method:
  return spec.Method(
    label,
    'fmnist:asynflc_ef',
    grid={'hparams.server_lr': SERVER_LRS if contraction else UNSCALED_SERVER_LRS},
    fixed={**TOP3_Q4B, 'hparams.scaled': contraction},
  )


QSGD_ETA = spec.Experiment(
  key='table3_q4b_eta_g',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Top-3% + Q4b with EF: the contraction of Definition 3 with a tuned server rate',
  ref='Fig. 3, Table III, Obs. 5-6',
  setting=SETTING.split(' FedBuff (')[0]
  + ' Here eta_l = 0.1 for all and the server rate eta_g is tuned on {1, 4, 12}: the '
  'contraction Q_s(Top_k(x)) / (1 + beta) shrinks every upload by 1 + beta = 12 '
  '(k = 5,977, s = 7), which eta_g = 12 undoes on the aggregate; for top-3% + Q2b '
  '(s = 1, 1 + beta = 78) on {1, 9, 78}; AsynFL, which has no contraction to undo, on '
  '{0.3, 1, 4}; the unscaled top-3% + Q4b (12x the contraction) on {0.03, 0.1, 0.3}.',
  base=eta_g,
  methods=(
    spec.Method('AsynFL', 'fmnist:asynfl', grid={'hparams.server_lr': ASYNFL_SERVER_LRS}),
    _q4b('AsynFLC-EF(top3+Q4b), contraction', True),
    _q4b('AsynFLC-EF(top3+Q4b), unscaled', False),
    spec.Method(
      'AsynFLC-EF(top3+Q2b), contraction',
      'fmnist:asynflc_ef',
      grid={'hparams.server_lr': Q2B_SERVER_LRS},
      fixed={**TOP3_Q4B, 'hparams.bits': 2},
    ),
  ),
  # The contraction is Definition 3's compressor (the paper's claims, in the tally); the
  # unscaled Q_s(Top_k(x)) is this project's contrast, scored outside it.
  claims=_ef_claims('AsynFLC-EF(top3+Q4b), contraction', 0.002)
  + _ef_claims('AsynFLC-EF(top3+Q2b), contraction', 0.001)
  + _ef_claims('AsynFLC-EF(top3+Q4b), unscaled', 0.002, UNSCALED),
  deviations=(
    DEVIATIONS[0].replace(
      'Every method is tuned on the same eta_l grid {0.02, 0.05, 0.1, 0.2, 0.4} (the paper '
      'fixes eta_l = 0.01; a first run on 0.02-0.1 selected 0.1, its edge, for every method).',
      'eta_l = 0.1 (the Table III experiment selected it, on its first grid 0.02-0.1, for '
      'every AsynFL variant); eta_g tuned on {1, 4, 12} for every method but top-3% + Q2b '
      'and AsynFL (below; the paper does not give eta_g).',
    ),
    'The unscaled Q_s(Top_k(x)) (the library default) is not a contraction at b = 4 (beta = '
    '11 >= 1); it is run for contrast, on the window {0.03, 0.1, 0.3} centred on its '
    'selection (below); it never learns (-69 pts against AsynFL, -80 at eta_g = 1).',
    'Top-3% + Q2b (s = 1) shrinks every upload by 1 + beta = 78, so its eta_g grid is '
    '{1, 9, 78} (the same budget of 3, from 1 to the factor that undoes the contraction); '
    'in the Table III experiment it was tuned on eta_l only, at eta_g = 1.',
    "The contraction methods' grids reach their factors (12, 78) and select inside (4, 9).",
  ),
  extended=(
    'after decided verdicts against an edge, with test seeds 3-12 looked at each time, the '
    'selection ran again and the tests again on seeds 3-12 (2026-11-25/26). AsynFL: '
    'selected at eta_g = 1, the low edge of {1, 4, 12}, behind the decided "top-3% + Q4b, '
    'contraction needs 10x less upload than AsynFL"; its window moved one step down, '
    '{0.3, 1, 4}, and it selects 1 again, now inside. The unscaled top-3% + Q4b: on '
    '{1, 4, 12} every setting collapsed (validation 0.10) and it selected 1; on {0.1, 0.3, '
    '1}, 0.1 (the low edge again); on {0.01, 0.03, 0.1}, 0.1 (then the high edge); now '
    '{0.03, 0.1, 0.3}, centred on 0.1. Bound: at most 2 extensions per edge.'
  ),
  target=TARGET,
)


SCALED_SIGN = "a contrast of this project's: the scaled Sign is not the paper's compressor"


def _sign(label: str, base_iid: bool, scaled_sign: bool) -> spec.Method:
  fixed = {'hparams.compressor': 'sign', 'hparams.fraction': None}
  if scaled_sign:
    fixed['hparams.scaled'] = True
    grid = {'hparams.client_lr': CLIENT_LRS}
  else:  # +-1 per coordinate: eta_l barely matters, the step is eta_g |S_t| / n
    grid = {'hparams.server_lr': SIGN_SERVER_LRS}
  if base_iid:
    fixed['partition'] = 'iid'
  return spec.Method(label, 'fmnist:asynflc', grid=grid, fixed=fixed)


SIGN = spec.Experiment(
  key='fig5_sign',
  title='Fig. 5: AsynFLC(Sign) without EF, IID vs non-IID FMNIST',
  ref='Fig. 5, Obs. 8-9',
  setting=SETTING.split(' FedBuff (')[0]
  + ' IID methods use partition = iid (the same 12,000 samples split uniformly).',
  base=scaled,
  methods=(
    _sign('Sign, non-IID', False, False),
    _sign('Sign, IID', True, False),
    _sign('scaled Sign, non-IID', False, True),
    _sign('scaled Sign, IID', True, True),
  ),
  # Obs. 8 in the tally: Sign fails to converge on non-IID data (read as never reaching
  # 75%), and heterogeneity hampers its convergence (IID reaches 75% in fewer steps than
  # non-IID, each arm at its own validation-selected eta_g, as every comparison here).
  # Outside it: final accuracy, the same at the IID arm's eta_g for both, and the scaled
  # Sign (not the paper's).
  claims=(
    spec.Claim(
      'Obs. 8, Fig. 5(b)',
      'AsynFLC(Sign) without EF fails to converge on non-IID data (never reaches 75%, on '
      'every test seed; shown beside Sign on IID data)',
      'Sign, non-IID',
      'Sign, IID',
      quote=OBS8,
      metric='not_reached',
      kind='on_seeds',
    ),
    spec.Claim(
      'Obs. 8, Fig. 5',
      'Data heterogeneity hampers AsynFLC(Sign) without EF: it ends higher on IID data '
      'than on non-IID (final accuracy, each at its own selected eta_g)',
      'Sign, IID',
      'Sign, non-IID',
      quote=OBS8,
      restated=(
        'each arm at its own validation-selected eta_g (IID 0.001, non-IID 0.003), where '
        "both ran at the IID arm's 0.001: a common rate chosen for one arm favours it."
      ),
      outside=(
        'another reading of Obs. 8 (final accuracy); the tally scores "hampers the '
        'convergence" as the speed to 75%'
      ),
    ),
    spec.Claim(
      'Obs. 8, Fig. 5',
      "AsynFLC(Sign) without EF ends higher on IID than on non-IID data at the IID arm's "
      'eta_g (0.001) for both',
      'Sign, IID',
      'Sign, non-IID',
      quote=OBS8,
      at={'hparams.server_lr': 0.001},
      outside=(
        "another reading of Obs. 8: both arms at the IID arm's selected eta_g; the tally "
        'scores the speed to 75%, each arm at its own'
      ),
    ),
  )
  + tuple(
    spec.Claim(
      'Obs. 8, Fig. 5' if not pre else 'Obs. 8-9, Fig. 5',
      f'AsynFLC({pre}Sign) without EF reaches 75% faster on IID data than on non-IID '
      '(each at its own selected step size)',
      f'{pre}Sign, IID',
      f'{pre}Sign, non-IID',
      metric='steps_to_target',
      quote=OBS8 if not pre else '',
      outside='' if not pre else SCALED_SIGN,
      restated=(
        'in the tally, as Obs. 8 says "hampers the convergence": the server steps to 75%, '
        'where the tally scored final accuracy (now outside it).'
      )
      if not pre
      else '',
    )
    for pre in ('', 'scaled ')
  )
  + (
    spec.Claim(
      'Obs. 8-9, Fig. 5',
      'AsynFLC(scaled Sign) without EF ends higher on IID data than on non-IID (final '
      'accuracy, each at its own selected step size)',
      'scaled Sign, IID',
      'scaled Sign, non-IID',
      outside=SCALED_SIGN,
    ),
  ),
  deviations=(
    DEVIATIONS[0].replace(
      'Every method is tuned on the same eta_l grid {0.02, 0.05, 0.1, 0.2, 0.4}',
      'Every method has the same grid budget (5)',
    ),
    'Sign as defined in Sec. III-B sends +-1 per coordinate: each round moves every weight '
    'by about eta_g |S_t| / n whatever eta_l, so the unscaled Sign is tuned on eta_g in '
    '{0.0003, 0.001, 0.003, 0.01, 0.03} (eta_l = 0.05; at eta_g = 1 it diverged within 3 '
    'rounds on the single-seed page, IID or not); the paper does not give its eta_g. The '
    'scaled Sign '
    "(times ||x||_1 / d, signSGD with EF's scale; compressor option scaled=True) is tuned "
    'on eta_l at eta_g = 1. Both have the same budget (5).',
    'The paper also contrasts AsynFLC(top3) IID vs non-IID in Fig. 5; here Top-3% without EF '
    'is scored against EF and AsynFL on non-IID data only (Table III experiment).',
  ),
  target=TARGET,
)

# ---- Table III at the paper's own FMNIST setting (Sec. V-A), as far as it gives one ----------
PAPER_CLIENTS = 100
PAPER_ROUNDS = 100  # ours: the paper gives no T (AsynFL passes 75% near step 40 on seed 0)
# FedBuff at n = 100: the 2-core ratios (Mc = 12, M = 8 of 20 clients) scaled by 5 (ours).
PAPER_FEDBUFF = {'schedule.concurrency': 60, 'schedule.buffer_size': 40}


def paper_setting(c):
  """Sec. V-A: n = 100 clients, Dirichlet(0.4) over all 60,000 FMNIST training samples (2,000
  of them the validation split), batch 128, eta_l = 0.01; K, the job times and the window as
  the 2-core setting (the paper gives none); T = 100, evaluation every step."""
  c.num_clients = PAPER_CLIENTS
  c.train_subset = 0
  c.validation_size = 2000
  c.batch_size = 128
  c.hparams.client_lr = 0.01
  c.num_rounds = PAPER_ROUNDS
  c.eval_every = 1
  c.eval_train_samples = 1000


PAPER_SETTING_TEXT = (
  "The paper's FMNIST setting (Sec. V-A): n = 100 clients, Dirichlet(0.4) over all 60,000 "
  'Fashion-MNIST training samples (2,000 of them the validation split, no client owns '
  'them), MLP 784-200-200-10, local batch 128, eta_l = 0.01 for every method, job times '
  'normally distributed. Ours (the paper gives none): Normal(10, 3) s job times, K = 5 local '
  'steps, a 5 s window per AsynFL round (about 40 of 100 clients report), eta_g = 1, '
  f'FedBuff with Mc = {PAPER_FEDBUFF["schedule.concurrency"]} jobs in flight and buffer M = '
  f'{PAPER_FEDBUFF["schedule.buffer_size"]}, T = {PAPER_ROUNDS} server steps, evaluation '
  'every step. Uploads counted as in the 2-core setting (values, indices and norms).'
)
# The methods run at the paper's setting.
PAPER_METHODS = ('FedBuff', 'AsynFL', 'AsynFLC(top3)', 'AsynFLC(Q4b)', 'AsynFLC-EF(top3)')
AT_TWO_CORES = (
  'another reading: the same statement at 2-core scale (20 clients, batch 32, eta_l tuned); '
  "the tally scores it at the paper's own setting (the table3_paper experiment)"
)


def _at_paper(c: spec.Claim) -> spec.Claim:
  return dataclasses.replace(c, ref=f"{c.ref} (paper's setting)")


# The statements of Table III's experiment among the paper setting's methods: the tally
# scores them at the paper's setting, and the 2-core run beside it, outside the tally.
PAPER_CLAIMS = tuple(
  c for c in TABLE3.claims if not c.outside and {c.better, c.worse} <= set(PAPER_METHODS)
)


TABLE3_PAPER = spec.Experiment(
  key='table3_paper',
  title="Table III / Fig. 1 at the paper's FMNIST setting: n = 100, batch 128, eta_l = 0.01",
  ref='Table III, Fig. 1, Obs. 1-5 (Sec. V-A setting)',
  setting=PAPER_SETTING_TEXT,
  base=paper_setting,
  methods=tuple(
    spec.Method(
      m.label,
      m.config,
      grid={},
      fixed={**m.fixed, **(PAPER_FEDBUFF if m.label == 'FedBuff' else {})},
    )
    for m in TABLE3.methods
    if m.label in PAPER_METHODS
  ),
  claims=tuple(_at_paper(c) for c in PAPER_CLAIMS),
  test_seeds=CONFIRM,
  beside='table3',
  deviations=(
    'Not tuned: the paper fixes eta_l = 0.01 for every method and gives no eta_g (1 here, '
    'as in the 2-core setting), so every method has one setting; the selection seeds only '
    'record its validation accuracy.',
    "Four of the 2-core experiment's methods: the paper's FedBuff, AsynFL, AsynFLC(top3) and "
    'AsynFLC(Q4b); the top-3% + QSGD variants need a tuned eta_g (table3_q4b_eta_g) and the '
    "per-job control is this project's, so they stay at 2-core scale.",
    'Compute: FedBuff, AsynFL, AsynFLC(top3) and AsynFLC(Q4b) took 206 min of the shared 2 '
    'cores (selection 78 min, test 128 min; the 2-core Table III, 28 min in all), run from a '
    'copy of this checkout and folded into the records by reproduce.py, whose manifest then '
    'times the fold, not the runs; AsynFLC-EF(top3), run in place on 2026-11-29, took 78 min '
    '(its manifest entries).',
    DEVIATIONS[1],
    DEVIATIONS[2].split(' (compressor option')[0] + '.',
  ),
  target=TARGET,
)

TABLE3 = dataclasses.replace(
  TABLE3,
  claims=tuple(
    dataclasses.replace(c, outside=AT_TWO_CORES) if c in PAPER_CLAIMS else c for c in TABLE3.claims
  ),
)

PAPER = spec.Paper(
  key='asynfl',
  number='004',
  citation=(
    'Yang, Hou, Wu, *Convergence Analysis of Asynchronous Federated Learning with Gradient '
    'Compression for Non-Convex Optimization*'
  ),
  setting=(
    'n = 100 clients, Dirichlet(0.4), MLP at eta_l = 0.01, batch 128, MNIST/FMNIST, Normal '
    'job times, a fixed server waiting window (Sec. V).'
  ),
  experiments=(TABLE3, TABLE3_PAPER, SIGN, QSGD_ETA),
)
