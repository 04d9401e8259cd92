"""MasFL / AdaMasFL reproduction (paper 000: Yan, Zhong, Wang, Zhang, "Momentum-Driven Adaptivity").

Sec. 6 / App. E.1 (FMNIST): 3-conv + 2-FC CNN, N = 100 clients, Dirichlet(0.5) or
IID, S = M = 10 updates per server step, 2 local epochs of batch 100, FedBuff's clock
with concurrency Mc = 20 and durations U(0, 20), T = 600; baselines CA2FL and FADAS.
"""

import dataclasses

from afl_jax.reproduction import spec

ROUNDS = 60
CLIENT_LRS = (0.01, 0.03, 0.1)  # the same eta_l grid for every method (Fig. 3's axis)


# The confirmatory test (issue 49): fresh test seeds, none of which an earlier test of the
# experiment used, for the experiments whose grid or seeds changed after a look at their
# test seeds (``looked``: the seeds looked at before).
CONFIRM = tuple(range(100, 110))
LOOKED = tuple(range(3, 13))


def scaled(c):
  """configs/fmnist.py:<method> with the MLP, a validation split and ROUNDS server steps."""
  c.model = 'mlp'
  c.num_rounds = ROUNDS
  c.eval_every = 5
  c.validation_size = 2000
  c.eval_train_samples = 1000


iid = spec.with_fields(scaled, {'partition': 'iid'})

MC_HIGH = 80  # Fig. 2's larger concurrency (N = 100, M = 10 allow Mc <= 91)


# Fig. 1 (non-IID) tunes every rate a method has inside a declared grid: eta_l x the
# server rate around its config's value (MasFL's gamma, CA2FL's eta, FADAS's AMSGrad eta;
# those values came from a short sweep outside the protocol). AdaMasFL's gamma and beta are
# Thm 4.1's (the paper's "tuning-free" method): it has no server-rate axis by design and is
# tuned on the others' eta_l axis only (fewer settings: conservative for claims in its
# favour). Every axis has the same number of values for every method that sweeps it.
SERVER_LRS = {'MasFL': (0.03, 0.1, 0.3), 'CA2FL': (0.3, 1.0, 3.0), 'FADAS': (3e-4, 1e-3, 3e-3)}
# Fig. 1 / Fig. 3 (non-IID), where each eta_l selects its own server rate: on the 3-value
# windows CA2FL and FADAS at eta_l = 0.03 sat on the low edge of theirs (decided Fig. 3
# verdicts), MasFL on the low edge at 0.01 and the high one at 0.1. Extended one value on
# the same ~3x spacing, MasFL too, so every method keeps 4 server rates (a shifted 3-value
# window would have put CA2FL's eta_l = 0.01 and FADAS's eta_l = 0.1 selections on its new
# high edge).
WIDE_SERVER_LRS = {
  'MasFL': (0.01, 0.03, 0.1, 0.3),
  'CA2FL': (0.1, 0.3, 1.0, 3.0),
  'FADAS': (1e-4, 3e-4, 1e-3, 3e-3),
}
ADAMASFL_UNTUNED = {
  'hparams.server_lr': "Thm 4.1 sets AdaMasFL's gamma and beta (tuning-free by the paper's design)"
}
# Thm 4.1 also fixes AdaMasFL's local rate, eta = 1 / (K sqrt(T)) (0.026 at K = 5, T = 60). It
# is tuned here on the others' eta_l axis all the same (ADAMASFL_ETA says why, on the pages).
ADAMASFL_ETA = (
  "AdaMasFL's local rate is tuned although Thm 4.1 fixes it too, eta = 1 / (K sqrt(T)) = "
  "0.026 at K = 5, T = 60: the paper's own Fig. 3 runs AdaMasFL across learning rates, its "
  'claims compare the methods at each eta_l, and so are scored here; fixing eta for Fig. 1 '
  "alone would be a new sweep of every Fig. 1 and Fig. 2 experiment, beyond this revision's "
  "2-core budget. Fig. 1 (non-IID) selects 0.03, the value of the grid nearest the theorem's "
  '(the Fig. 1(d) rate of Fig. 2 below).'
)


def tuned(lrs, server_lrs) -> tuple:
  """MasFL, AdaMasFL, CA2FL and FADAS (configs/fmnist.py:<method>; FADAS with
  delay_rule='divide') with every rate tuned: eta_l ``lrs`` x the server rate
  (``server_lrs``), AdaMasFL (gamma and beta from Thm 4.1) on the eta_l values ``lrs``."""
  return tuple(
    spec.Method(
      label,
      f'fmnist:{label.lower()}',
      {'hparams.client_lr': lrs, 'hparams.server_lr': server_lrs[label]}
      if label in server_lrs
      else {'hparams.client_lr': lrs},
      {'hparams.delay_rule': 'divide'} if label == 'FADAS' else {},
      {} if label in server_lrs else ADAMASFL_UNTUNED,
    )
    for label in ('MasFL', 'AdaMasFL', 'CA2FL', 'FADAS')
  )


TUNED = tuned(CLIENT_LRS, WIDE_SERVER_LRS)


IID_LRS = (0.003, 0.01, 0.03, 0.1, 0.3)  # on CLIENT_LRS three of four IID selections hit an edge
# IID: CA2FL selected eta = 0.3, the low edge of (0.3, 1, 3), behind a decided verdict; the
# IID claims use only the overall selection, so its 3-value window moves one step down (3.0,
# never selected, leaves) and every method keeps 3 server rates.
IID_SERVER_LRS = {**SERVER_LRS, 'CA2FL': (0.1, 0.3, 1.0)}


# The paper gives its results as curves only (Figs. 1-3, no table): no claim of this
# paper has a number to record (paper_effect None).
FIG1_QUOTE = (
  'The results show that our proposed methods, MasFL and AdaMasFL, significantly '
  'outperform the baselines, CA2FL and FADAS, in both convergence speed and test accuracy.'
)
FIG2_QUOTE = (
  'We observe that AdaMasFL demonstrates exceptional robustness to varying levels of '
  'asynchrony, maintaining nearly consistent performance despite increasing delays. In '
  'contrast, the performance of other algorithms deteriorates significantly, requiring '
  'reconfiguration to adapt to changing environments.'
)
FIG3_QUOTE = (
  'It is evident that AdaMasFL consistently outperforms the baselines, CA2FL and FADAS, '
  'across the displayed learning rate regions.'
)


def claims(data: str) -> tuple:
  """Fig. 1: MasFL and AdaMasFL outperform CA2FL and FADAS (on ``data``)."""
  return tuple(
    spec.Claim(
      f'Sec. 6, Fig. 1 ({data})',
      f'{ours} outperforms {base} in test accuracy at Mc = 20',
      ours,
      base,
      quote=FIG1_QUOTE,
    )
    for ours in ('AdaMasFL', 'MasFL')
    for base in ('CA2FL', 'FADAS')
  )


def fig3_claims(lrs) -> tuple:
  """Fig. 3 (non-IID): AdaMasFL outperforms CA2FL and FADAS at each eta_l of ``lrs``."""
  return tuple(
    spec.Claim(
      'Sec. 6, Fig. 3 (non-IID)',
      f'AdaMasFL outperforms {base} at every eta_l (here at eta_l = {lr:g})',
      'AdaMasFL',
      base,
      quote=FIG3_QUOTE,
      at={'hparams.client_lr': lr},
    )
    for lr in lrs
    for base in ('CA2FL', 'FADAS')
  )


SETTING = (
  'configs/fmnist.py:<method> (setting MASFL): N = 100 clients, FedBuff '
  'clock with Mc = 20, buffer M = S = 10, durations U(0, 20), K = 5 local steps of batch '
  '50, Fashion-MNIST with the MLP 784-200-200-10, 12,000 training samples of which 2,000 '
  f'are the validation split, T = {ROUNDS} server steps, evaluation every 5 steps.'
)

DEVIATIONS = (
  'MLP instead of the 3-conv + 2-FC CNN (logistic regression, used on the old page, '
  'cannot show the collapse the paper is about); 12k training samples; K = 5 steps of '
  f'batch 50 instead of 2 epochs of batch 100; T = {ROUNDS} instead of 600.',
  'Consequence of the short T for the theory rates (S K = 50 here): beta = sqrt(SK/T) is '
  "0.91 at T = 60 against 0.29 at the paper's T = 600, and AdaMasFL's gamma = "
  '(SK)^(1/4) / T^(3/4) is 0.12 against 0.022: both momentum-driven methods run with '
  "about 3x heavier momentum and (AdaMasFL) a 5x larger server rate than at the paper's "
  "length, so their verdicts here are for that regime, not the paper's.",
  "FADAS uses delay_rule='divide' (eta / tau_max, the authors' released code): with "
  "eta <= 3e-3 the paper's min(eta, 1/tau) never binds (1/tau >= 0.05), so the "
  'delay-adaptive rate would be inert; with divide it binds on every step whose largest '
  'staleness exceeds tau_c = 1.',
)


def _values(xs) -> str:
  return '{' + ', '.join(f'{x:g}' for x in xs) + '}'


def tuned_deviation(lrs, server_lrs, why: str = '') -> str:
  """The deviation of an experiment whose methods are ``tuned(lrs, server_lrs)``."""
  servers = ', '.join(
    f'{label} {name} {_values(server_lrs[label])}'
    for label, name in (('MasFL', 'gamma'), ('CA2FL', 'eta'), ('FADAS', 'AMSGrad eta'))
  )
  n = len(server_lrs['MasFL'])
  return (
    f'Every rate is tuned: MasFL, CA2FL and FADAS on eta_l {_values(lrs)}{why} x their '
    f'server rate ({servers}; budget {n * len(lrs)} per method); AdaMasFL on the same '
    f"eta_l axis (budget {len(lrs)}): it has no server-rate axis by the paper's design "
    '(Thm 4.1 sets its gamma and beta at this T, the paper\'s "tuning-free" method), so '
    'it gets fewer settings, which is conservative for the claims in its favour. Every '
    'axis has the same values for every method that sweeps it (eta_l) or the same number '
    '(the server rates). MasFL beta = sqrt(SK/T) as in Thm 3.1. ' + ADAMASFL_ETA
  )


EQUAL_AXES = (
  "AdaMasFL was tuned on {ada} values of eta_l over the others' range (the others' budget) "
  "and, after a decided verdict on test seeds 3-12, it got the others' eta_l axis {lrs} and "
  'no server-rate axis; the selection ran again and the tests again on seeds 3-12 '
  '(2026-11-26). '
)
EXTENDED = (
  'Grid extended after a decided verdict went against its edge, test seeds 3-12 looked at '
  '(2026-11-26): {what}. The selection ran again and the tests again on seeds 3-12. Bound: '
  'at most 2 extensions per edge, within the compute of a session.'
)
RETUNED = (
  "A first run tuned the client rate eta_l only, the server rates at their configs' values; "
  'after its test on seeds 3-12 every rate was tuned (2026-11-25/26). '
)
TUNED_DEVIATION = tuned_deviation(CLIENT_LRS, WIDE_SERVER_LRS)
# Why a selection on an edge of its grid stands (the edge rule).
NOT_EXTENDED = (
  'tested before the edge rule; extending eta_l for every method is a new selection sweep '
  "beyond this revision's 2-core budget, so the selection stands and a decided verdict "
  'against it names the edge'
)
SPLIT_AXIS = (
  "eta_l is Fig. 3's axis, split between this experiment and Fig. 1's ({0.01, 0.03, 0.1} "
  'and {0.001, 0.003}): every claim here compares the methods at one eta_l, and no claim '
  'scores the overall selection'
)


def tuned_deviations(lrs, server_lrs, note: str, why: str = '') -> tuple:
  """The deviations of a paper experiment whose methods are ``tuned(lrs, server_lrs)``:
  the shared ones and ``note`` (the experiment's own)."""
  return (
    DEVIATIONS[0],
    tuned_deviation(lrs, server_lrs, why),
    *DEVIATIONS[1:],
    *([note] if note else []),
  )


def looked(lrs, what: str) -> str:
  """The grids of a paper experiment changed after a look at its test seeds: the first
  run's, AdaMasFL's equal axes (before them it had 3 eta_l values per value of the
  others', their budget on 3 server rates) and the extension ``what``."""
  return (
    RETUNED + EQUAL_AXES.format(ada=len(lrs) * 3, lrs=_values(lrs)) + EXTENDED.format(what=what)
  )


# Fig. 2 re-tuned: on Fig. 1's first 3-value server windows MasFL (gamma 0.03, both Mc)
# and CA2FL (eta 0.3) sat on their low edges behind decided contrasts.
FIG2_EXTENDED = looked(
  CLIENT_LRS,
  "on Fig. 1's first 3-value server-rate windows MasFL (gamma = 0.03 at both Mc) and "
  'CA2FL (eta = 0.3; at Mc = 80 also eta_l = 0.01) were selected on low edges behind '
  "decided contrasts; every method now has Fig. 1's 4 server rates (216 selection runs, 21 "
  'min on 2 cores). MasFL selects gamma = 0.03 again, now interior, and its two contrasts '
  'are unchanged. At Mc = 80 CA2FL now selects eta_l = 0.1 and eta = 0.1 (validation 0.742 '
  'against 0.705 on the first window), the edge of both its axes, and "AdaMasFL beats '
  'CA2FL at Mc = 80" went from agrees (+4.7 pts) to inconclusive: the move the edge flag '
  'warned of',
)

FIG1_NONIID = spec.Experiment(
  key='fig1_noniid',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Fig. 1, non-IID (Dirichlet 0.5), Mc = 20',
  ref='Fig. 1 (non-i.i.d.)',
  setting=SETTING,
  base=scaled,
  methods=TUNED,
  claims=claims('non-IID') + fig3_claims(CLIENT_LRS),
  deviations=tuned_deviations(
    CLIENT_LRS,
    WIDE_SERVER_LRS,
    'Fig. 3 is scored on these sweeps: at each eta_l of {0.01, 0.03, 0.1} each method '
    'takes its validation-best server rate; one order of magnitude of eta_l (with the '
    'low-rate experiment below, two).',
  ),
  extended=looked(
    CLIENT_LRS,
    'at eta_l = 0.03 CA2FL (eta 0.3) and FADAS (eta 3e-4) were selected on the low '
    'edge of their 3-value server windows behind two decided Fig. 3 verdicts; CA2FL '
    '{0.3, 1, 3} -> {0.1, 0.3, 1, 3}, FADAS {3e-4, 1e-3, 3e-3} -> {1e-4, 3e-4, 1e-3, '
    '3e-3}, and MasFL {0.03, 0.1, 0.3} -> {0.01, 0.03, 0.1, 0.3} (its own eta_l = 0.01 '
    'selection sat on the low edge) so that every method keeps the same number of server '
    'rates; 4 values rather than a shifted 3-value window because each eta_l selects its '
    'own server rate and a shifted window would put CA2FL at eta_l = 0.01 and FADAS at '
    'eta_l = 0.1 on its new high edge',
  ),
  edges_kept={'CA2FL': NOT_EXTENDED, 'FADAS': NOT_EXTENDED},
)

FIG1_IID = spec.Experiment(
  key='fig1_iid',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Fig. 1, IID, Mc = 20',
  ref='Fig. 1 (i.i.d.)',
  setting=SETTING.replace('clients,', 'clients (IID partition),', 1),
  base=iid,
  methods=tuned(IID_LRS, IID_SERVER_LRS),
  claims=claims('IID'),
  deviations=tuned_deviations(
    IID_LRS,
    IID_SERVER_LRS,
    '',
    why=' (wider than non-IID: on {0.01, 0.03, 0.1} at the untuned server rates three of '
    'four IID selections sat on an edge of the grid)',
  ),
  extended=looked(
    IID_LRS,
    'CA2FL was selected at eta = 0.3, the low edge of {0.3, 1, 3}, behind the decided '
    '"MasFL outperforms CA2FL" verdict; the IID claims use only the overall selection, so '
    'its 3-value window moved one step down the same ~3x spacing, {0.1, 0.3, 1} (3.0, '
    'never selected, left), and every method keeps 3 server rates',
  ),
  edges_kept={
    'MasFL': 'gamma = 0.3 tops its window {0.03, 0.1, 0.3}, tested before the edge rule; '
    "extending it is a new selection sweep beyond this revision's 2-core budget, so the "
    'selection stands and a decided verdict against it names the edge'
  },
)


def fig2(mc: int, which: str, sweep: str, deviations: tuple) -> spec.Experiment:
  """Fig. 2 at the concurrency ``mc`` (``which``: 'higher', 'intermediate'): the Fig. 1
  (non-IID) experiment with Mc = ``mc`` clients training concurrently, every method
  re-tuned; ``sweep`` ends the setting, ``deviations`` follow the shared ones."""
  return spec.Experiment(
    key=f'fig2_mc{mc}',
    test_seeds=CONFIRM,
    looked=LOOKED,
    title=f'Fig. 2, non-IID (Dirichlet 0.5), {which} concurrency Mc = {mc}',
    ref='Fig. 2',
    setting=SETTING.replace('Mc = 20', f'Mc = {mc}', 1)
    + ' Everything else is the Fig. 1 (non-IID) experiment above'
    + sweep,
    base=spec.with_fields(scaled, {'schedule.concurrency': mc}),
    methods=tuned(CLIENT_LRS, WIDE_SERVER_LRS),
    claims=tuple(
      spec.Claim(
        'Fig. 2 setting, re-tuned',
        f'AdaMasFL beats {base} at Mc = {mc} when every method is re-tuned there',
        'AdaMasFL',
        base,
        outside="a contrast of this project's: the paper fixes the Fig. 1(d) rates (the "
        'fig2_fixed experiment scores its claim)',
      )
      for base in ('CA2FL', 'FADAS', 'MasFL')
    ),
    deviations=(DEVIATIONS[0], TUNED_DEVIATION, *deviations),
    extended=FIG2_EXTENDED,
    edges_kept={label: NOT_EXTENDED for label in ('AdaMasFL', 'CA2FL', 'FADAS')},
  )


FIG2_MC80 = fig2(
  MC_HIGH,
  'higher',
  ', so the Mc = 20 numbers on this page are the other end of the concurrency sweep.',
  (
    f'Fig. 2 sweeps several Mc values (not legible in the text); here one larger value, '
    f'Mc = {MC_HIGH}, against the Mc = 20 of Fig. 1 (N = 100 and M = 10 allow at most '
    'Mc = 91 on our FedBuff clock, so Mc = 100 is not possible).',
    'The paper fixes every method at its Fig. 1(d) rates and varies Mc (its claim is '
    'scored in the fig2_fixed experiment above); here every method is tuned again on the '
    'same grid at Mc = 80 (so a baseline that needs "reconfiguration" gets it): a '
    "contrast of this project's, scored outside the paper tally.",
    "FADAS uses delay_rule='divide' (eta / tau_max) as in Fig. 1. On this clock (seed 0, "
    '60 steps) the staleness t - s averages 7.1 with a largest value of 16 at Mc = 80 '
    '(1.8 and 4 at Mc = 20), and 58 of the 60 steps have tau_max > tau_c = 1, so the '
    'delay-adaptive rate binds on almost every step (at Mc = 80 it divides eta by ~14).',
  ),
)

FIG2_MC50 = fig2(
  50,
  'intermediate',
  ': Mc = 20, 50, 80 on this page form the concurrency sweep.',
  (
    'One intermediate point of the Fig. 2 sweep; every method is tuned again on the same '
    'grid at Mc = 50 (see the Mc = 80 experiment for how the claim is read).',
    "FADAS uses delay_rule='divide' (eta / tau_max). On this clock (seed 0, 60 steps) "
    'the staleness t - s averages 4.6 with a largest value of 10 at Mc = 50, and 58 of '
    'the 60 steps have tau_max > tau_c = 1, so the delay-adaptive rate binds on almost '
    'every step (it divides eta by ~9).',
  ),
)

# Fig. 2 as the paper runs it: "we fix the learning rate settings of all algorithms to
# those used in Figure 1d and evaluate their performance as Mc increases". Fig. 1(d) is
# the FMNIST non-IID panel; its rates here are the Fig. 1 (non-IID) experiment's
# validation-selected settings (tests/repro_test.py checks them against its selection
# records), each run unchanged at Mc = 20, 50 and 80. One setting per method (budget 1).
FIG1D_RATES = {
  'AdaMasFL': {'hparams.client_lr': (0.03,)},
  'CA2FL': {'hparams.client_lr': (0.1,), 'hparams.server_lr': (0.3,)},
  'FADAS': {'hparams.client_lr': (0.1,), 'hparams.server_lr': (0.001,)},
  'MasFL': {'hparams.client_lr': (0.03,), 'hparams.server_lr': (0.1,)},
}
FIG2_MCS = (20, 50, MC_HIGH)
FIG2_RUN_ORDER = (20, MC_HIGH, 50)  # the sweeps run in the methods' order: both ends first


def at_mc(label: str, mc: int) -> str:
  return f'{label} (Mc = {mc})'


FIG2_FIXED = spec.Experiment(
  key='fig2_fixed',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Fig. 2, non-IID (Dirichlet 0.5): every method at its Fig. 1(d) rates, Mc = 20, 50, 80',
  ref='Fig. 2',
  setting=SETTING.replace('with Mc = 20', 'with Mc = 20, 50 or 80', 1)
  + ' Every method keeps the rates the Fig. 1 (non-IID) experiment selected (the Fig. 1(d) '
  'setting) at every Mc, as in the paper.',
  base=scaled,
  methods=tuple(
    next(m for m in TUNED if m.label == label).variant(
      {'schedule.concurrency': mc}, label=at_mc(label, mc), grid=FIG1D_RATES[label]
    )
    for mc in FIG2_RUN_ORDER
    for label in FIG1D_RATES
  ),
  claims=tuple(
    spec.Claim(
      'Sec. 6, Fig. 2',
      f'AdaMasFL loses less accuracy than {base} from Mc = 20 to Mc = {mc} (every method '
      'at its Fig. 1(d) rates)',
      at_mc('AdaMasFL', mc),
      at_mc(base, mc),
      quote='In Figure 2, we fix the learning rate settings of all algorithms to those used '
      'in Figure 1d and evaluate their performance as Mc increases. ' + FIG2_QUOTE,
      baseline=(at_mc('AdaMasFL', 20), at_mc(base, 20)),
    )
    for mc in FIG2_MCS[1:]
    for base in ('CA2FL', 'FADAS', 'MasFL')
  ),
  deviations=(
    DEVIATIONS[0],
    'No tuning: one setting per method, the Fig. 1 (non-IID) selection (AdaMasFL eta_l = '
    '0.03 with Thm 4.1 gamma and beta; CA2FL eta_l = 0.1, eta = 0.3; FADAS eta_l = 0.1, '
    'eta = 0.001; MasFL eta_l = 0.03, gamma = 0.1), at every Mc. The Mc = 20 runs repeat '
    "Fig. 1's on the same test seeds. The claim is scored as the per-seed drop of final "
    "test accuracy from Mc = 20 to Mc = 50 (or 80): AdaMasFL's drop smaller than each "
    "baseline's. Fig. 2's own Mc values are not legible in the text; N = 100 and M = 10 "
    'allow at most Mc = 91 on this clock.',
    *DEVIATIONS[1:],
  ),
  extended=(
    "AdaMasFL's rate follows its Fig. 1 selection: it was 0.045 when AdaMasFL had 9 eta_l "
    'values, tested on seeds 3-12; with the equal axes of Fig. 1 it is 0.03, and its runs '
    'ran again on seeds 3-12 (2026-11-26).'
  ),
)

LOW_LRS = (0.001, 0.003)  # with Fig. 1's 0.01-0.1: two orders of magnitude of eta_l
# On 3-value windows CA2FL selected the high edge at eta_l = 0.001 (eta 3 of (0.3, 1, 3),
# then 10 of (1, 3, 10)) and the low edge at 0.003 (1 of (1, 3, 10)), behind decided Fig. 3
# verdicts; FADAS and MasFL sat on their low edges at both. Each eta_l selects its own
# server rate, so every method gets 5 values on the ~3x spacing, reaching past each edge.
LOW_SERVER_LRS = {
  'MasFL': (0.003, 0.01, 0.03, 0.1, 0.3),
  'CA2FL': (0.3, 1.0, 3.0, 10.0, 30.0),
  'FADAS': (3e-5, 1e-4, 3e-4, 1e-3, 3e-3),
}

FIG3_LOW = spec.Experiment(
  key='fig3_low_lr',
  test_seeds=CONFIRM,
  looked=LOOKED,
  title='Fig. 3, non-IID: eta_l = 0.001 and 0.003 (with Fig. 1, two orders of magnitude)',
  ref='Fig. 3 (non-i.i.d.)',
  setting=SETTING
  + ' Everything else is the Fig. 1 (non-IID) experiment above; its eta_l = 0.01-0.1 and '
  'these two values together span 0.001-0.1.',
  base=scaled,
  methods=tuned(LOW_LRS, LOW_SERVER_LRS),
  claims=fig3_claims(LOW_LRS),
  deviations=tuned_deviations(
    LOW_LRS,
    LOW_SERVER_LRS,
    "A separate experiment of the two low rates beside Fig. 1's three; at each eta_l "
    'each baseline takes its validation-best server rate, and the per-rate claims compare '
    'methods at the same eta_l.',
  ),
  extended=looked(
    LOW_LRS,
    'at eta_l = 0.001 CA2FL was selected at eta = 3, the high edge of {0.3, 1, 3}, '
    'behind a decided Fig. 3 verdict; a 3-value window one step up, {1, 3, 10}, selected '
    '10 at eta_l = 0.001 (the high edge again) and 1 at eta_l = 0.003 (now the low edge), '
    'and FADAS and MasFL sat on the low edge of theirs at both rates. Since each eta_l '
    'selects its own server rate, every method now has 5 server rates on the same ~3x '
    'spacing (MasFL gamma {0.003, ..., 0.3}, CA2FL eta {0.3, ..., 30}, FADAS eta {3e-5, '
    '..., 3e-3}; 90 selection runs, 9 min on 2 cores). Every selection at each eta_l is '
    'interior and the same as before (CA2FL eta 10 at eta_l = 0.001 and 1 at 0.003, FADAS '
    '3e-4, MasFL 0.03), so the test runs and the verdicts are unchanged',
  ),
  edges_kept={label: SPLIT_AXIS for label in ('MasFL', 'AdaMasFL', 'CA2FL', 'FADAS')},
)

PAPER_ROUNDS = 600  # the paper's T, where the theory rates are the paper's
CNN_WIDTHS = 'afl_jax/models/cnn.py: 3x3 convolutions of 32, 64, 64 channels, a 128-unit FC layer'

FIG1_NONIID_T600 = dataclasses.replace(
  FIG1_NONIID,
  key='fig1_noniid_t600',
  beside='fig1_noniid',
  looked=(),
  title=f"Fig. 1, non-IID (Dirichlet 0.5), Mc = 20, at the paper's T = {PAPER_ROUNDS}",
  setting=SETTING.replace(
    f'T = {ROUNDS} server steps, evaluation every 5 steps',
    f"T = {PAPER_ROUNDS} server steps (the paper's), evaluation every 25 steps",
  ).replace('the MLP 784-200-200-10', f"the paper's 3-conv + 2-FC CNN ({CNN_WIDTHS})"),
  base=spec.with_fields(scaled, {'num_rounds': PAPER_ROUNDS, 'eval_every': 25, 'model': 'cnn'}),
  claims=tuple(
    dataclasses.replace(
      c,
      outside=f"the same statement at the paper's T = {PAPER_ROUNDS}, shown beside the "
      '2-core run the tally scores',
    )
    for c in claims(f'non-IID, T = {PAPER_ROUNDS}')
  ),
  extended='',
  edges_kept={},
  deviations=(
    f"The CNN's widths are this project's ({CNN_WIDTHS}; the paper gives none); "
    + DEVIATIONS[0].split('; ', 1)[1].replace(f'; T = {ROUNDS} instead of 600', ''),
    TUNED_DEVIATION,
    DEVIATIONS[2],
    'Declared for an accelerator, not run on 2 CPU cores (run=False): '
    '`python scripts/reproduce.py --paper=masfl --only=fig1_noniid_t600`. Timed on 2 CPU '
    "cores (2026-11-29, each client's convolutions XLA's own, one client at a time, issue "
    '47): one MasFL run with the CNN runs 50 steps in 62.7 s (48 steps/min; 23 with the '
    'patches of issue 39), so one 600-step run takes ~12.5 min and the sweep of 117 runs '
    "~24 h of the 2 cores. At this T, beta = sqrt(SK/T) = 0.29 and AdaMasFL's gamma = "
    "0.022 are the paper's.",
  ),
  run=False,
)

PAPER = spec.Paper(
  key='masfl',
  number='000',
  citation=(
    'Yan, Zhong, Wang, Zhang, *Momentum-Driven Adaptivity: Towards Tuning-Free '
    'Asynchronous Federated Learning*'
  ),
  setting=(
    'FMNIST with a 3-conv + 2-FC CNN and CIFAR-10 with ResNet-18, N = 100, S = 10, '
    'Mc = 20, durations U(0, 20), Dirichlet(0.5), T = 600 (Sec. 6, App. E.1).'
  ),
  experiments=(
    FIG1_NONIID,
    FIG1_IID,
    FIG2_FIXED,
    FIG2_MC50,
    FIG2_MC80,
    FIG3_LOW,
    FIG1_NONIID_T600,
  ),
)
