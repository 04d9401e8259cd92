"""FedFa reproduction (paper 001: Xu, Zhang, Di, Liu, Alharthi, Cao, "FedFa"), declared.

CIFAR-10 / ResNet-18, 100 clients, 10 training at once, long-tailed client delays
(many fast, few slow clients), wall-clock and rounds to target accuracy (Tables 2-3),
FedFa with FedProx / FedNova clients (Table 6); baselines FedAvg, FedBuff, FedAsync
and Port. Tables 2-3 and 6, Table 2's synchronous / FedAsync comparison, Fig. 5 and
Table 5 run, every method tuned on a 5-value client-rate grid.
"""

from afl_jax.pipeline.config import import_beside

spec = import_beside(__file__, 'spec')

UPDATES = 600  # client updates per run (every method gets the same number)
CLIENT_LRS = (0.003, 0.01, 0.03, 0.1, 0.3)  # 5 values: the optima inside the grid


def scaled(c):
  """paper_settings.fedfa_fmnist() + persistent per-client speeds and a validation split."""
  c.schedule.concurrency = 10
  c.schedule.client_speed = 'lognormal'  # fixed speeds: stragglers persist (the paper)
  c.schedule.client_speed_sigma = 1.0
  c.validation_size = 2000
  c.eval_train_samples = 1000


# FedFa-Delta at eta_g = 1 applies each client's delta once per arrival while it stays in
# the window of K: about K times. Its optimum on CLIENT_LRS was the low edge (0.003), so it
# is tuned on the grid a decade down (the same budget).
DELTA_LRS = (0.001, 0.003, 0.01, 0.03, 0.1)


def _fully_async(cfg: str, label: str, **fixed):
  delta = cfg.startswith('fedfa_delta') and 'hparams.server_lr' not in fixed
  return spec.Method(
    label,
    cfg,
    grid={'hparams.client_lr': DELTA_LRS if delta else CLIENT_LRS},
    fixed={'schedule.kind': 'fully_async', 'num_rounds': UPDATES, 'eval_every': 50, **fixed},
  )


def _buffered(cfg: str, label: str, **fixed):
  return spec.Method(
    label,
    cfg,
    grid={'hparams.client_lr': CLIENT_LRS},
    fixed={'schedule.buffer_size': 5, 'num_rounds': UPDATES // 5, 'eval_every': 10, **fixed},
  )


SETTING = (
  'paper_settings.fedfa_fmnist(): Fashion-MNIST, MLP, 15,000 training samples (2,000 of '
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
    _buffered('fedbuff_fmnist', 'FedBuff'),
    _buffered('port_fmnist', 'Port', **{'schedule.kind': 'port'}),
    _fully_async('fedfa_param_fmnist', 'FedFa-Param'),
    _fully_async('fedfa_delta_fmnist', 'FedFa-Delta'),
    _fully_async('fedfa_delta_fmnist', 'FedFa-Delta (1/K)', **{'hparams.server_lr': 0.2}),
  ),
  claims=(
    spec.Claim('Table 2', 'FedFa-Delta (eta_g = 1) beats FedBuff', 'FedFa-Delta', 'FedBuff'),
    spec.Claim('Table 2', 'FedFa-Delta (eta_g = 1) beats Port', 'FedFa-Delta', 'Port'),
    spec.Claim('Table 2', 'FedFa-Param beats FedBuff', 'FedFa-Param', 'FedBuff'),
    spec.Claim(
      'Table 2 (variant)', 'FedFa-Delta (eta_g = 1/K) beats FedBuff', 'FedFa-Delta (1/K)', 'FedBuff'
    ),
    spec.Claim(
      'Table 2',
      'FedBuff needs 2-4.5x the wall-clock of FedFa-Delta to the target (scored: >= 2x)',
      'FedFa-Delta',
      'FedBuff',
      metric='clock_to_target',
      factor=2.0,
    ),
    spec.Claim(
      'Table 2 (variant)',
      'FedBuff needs 2-4.5x the wall-clock of FedFa-Delta (eta_g = 1/K) (scored: >= 2x)',
      'FedFa-Delta (1/K)',
      'FedBuff',
      metric='clock_to_target',
      factor=2.0,
    ),
  ),
  deviations=(
    'Fashion-MNIST + MLP instead of CIFAR-10 + ResNet-18; accuracy after an equal number '
    'of client updates, and simulated wall-clock to the target (Table 2 measures time) '
    'within those updates.',
    "Port runs on its staleness-bounded clock (schedule.kind='port', B = 10, non-urgent).",
    "FedFa-Delta at the paper's eta_g = 1 and the 1/K variant are separate methods with "
    'separate claims.',
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
    _buffered('fedbuff_prox_fmnist', 'FedBuff + FedProx'),
    _fully_async('fedfa_delta_prox_fmnist', 'FedFa + FedProx'),
    _buffered('fedbuff_nova_fmnist', 'FedBuff + FedNova'),
    _fully_async('fedfa_delta_nova_fmnist', 'FedFa + FedNova'),
  ),
  claims=(
    spec.Claim('Table 6', 'FedFa improves FedProx', 'FedFa + FedProx', 'FedBuff + FedProx'),
    spec.Claim('Table 6', 'FedFa improves FedNova', 'FedFa + FedNova', 'FedBuff + FedNova'),
  ),
  deviations=('As Tables 2-3.',),
)


def _synchronous(cfg: str, label: str, cohort: int = 10, **fixed):
  """Synchronous rounds of ``cohort`` clients (FedAvg), the same number of client updates."""
  return spec.Method(
    label,
    cfg,
    grid={'hparams.client_lr': CLIENT_LRS},
    fixed={
      'schedule.clients_per_step': cohort,
      'num_rounds': UPDATES // cohort,
      'eval_every': max(UPDATES // cohort // 10, 1),
      **fixed,
    },
  )


TABLE2_SYNC = spec.Experiment(
  key='table2_sync',
  title='Table 2: FedFa-Delta against synchronous FedAvg and fully asynchronous FedAsync',
  ref='Table 2',
  setting=SETTING
  + ' FedAvg trains synchronous cohorts of 10 clients (60 rounds), waiting for the slowest.',
  base=scaled,
  methods=(
    _fully_async('fedfa_delta_fmnist', 'FedFa-Delta'),
    _fully_async('fedfa_delta_fmnist', 'FedFa-Delta (1/K)', **{'hparams.server_lr': 0.2}),
    _synchronous('fedavg_fmnist', 'FedAvg'),
    _fully_async('fedasync_fmnist', 'FedAsync'),
  ),
  claims=(
    spec.Claim(
      'Table 2',
      'FedAvg needs 5-7x the wall-clock of FedFa-Delta to the target (scored: >= 5x)',
      'FedFa-Delta',
      'FedAvg',
      metric='clock_to_target',
      factor=5.0,
    ),
    spec.Claim(
      'Table 2 (variant)',
      'FedAvg needs 5-7x the wall-clock of FedFa-Delta (eta_g = 1/K) (scored: >= 5x)',
      'FedFa-Delta (1/K)',
      'FedAvg',
      metric='clock_to_target',
      factor=5.0,
    ),
    spec.Claim(
      'Table 2',
      'FedAsync fails to reach the target (scored: FedFa-Delta reaches it in less simulated '
      'time; the to-target table counts the seeds of FedAsync that never reach it)',
      'FedFa-Delta',
      'FedAsync',
      metric='clock_to_target',
    ),
    spec.Claim(
      'Table 2 (variant)',
      'FedAsync fails to reach the target (scored: FedFa-Delta (eta_g = 1/K) reaches it in '
      'less simulated time)',
      'FedFa-Delta (1/K)',
      'FedAsync',
      metric='clock_to_target',
    ),
  ),
  target=0.73,
  deviations=(
    f'As Tables 2-3 (every method tuned on the client-rate grid {list(CLIENT_LRS)}).',
    'Target 73%, the default target of Tables 2-3 above, so the two experiments read alike.',
    "FedAsync at its config's mixing alpha = 0.6 with polynomial staleness weights (a = 0.5).",
  ),
)


def _window(k: int) -> spec.Method:
  return _fully_async('fedfa_param_fmnist', f'K = {k}', **{'hparams.window_size': k})


FIG5 = spec.Experiment(
  key='fig5_window',
  title='Fig. 5: the window size K of FedFa-Param',
  ref='Fig. 5',
  setting=SETTING + ' FedFa-Param with its sliding window of the last K = 5, 10 or 20 arrivals.',
  base=scaled,
  methods=(_window(5), _window(10), _window(20)),
  claims=(
    spec.Claim(
      'Fig. 5',
      'the window size K barely matters in a reasonable range (K = 5 matches K = 10 within '
      '2 points)',
      'K = 5',
      'K = 10',
      kind='equivalent',
      margin=0.02,
    ),
    spec.Claim(
      'Fig. 5',
      'K = 20 is slower (K = 10 reaches the target in less simulated time than K = 20)',
      'K = 10',
      'K = 20',
      metric='clock_to_target',
    ),
  ),
  target=0.73,
  deviations=(
    'As Tables 2-3; client rate tuned per K on the same 5-value grid.',
    "The paper plots accuracy over time; here 'slower' is simulated seconds to 73% (the "
    'target of Tables 2-3 above).',
  ),
)

MC_LOW, MC_HIGH = 5, 20  # Table 5 varies Mc over 2, 5, 10, 20


def _at_mc(method: spec.Method, mc: int) -> spec.Method:
  """``method`` with ``mc`` clients training at once (FedAvg: cohorts of ``mc``)."""
  if method.config == 'fedavg_fmnist':
    return _synchronous('fedavg_fmnist', f'{method.label} (Mc = {mc})', cohort=mc)
  fixed = {**method.fixed, 'schedule.concurrency': mc}
  return spec.Method(f'{method.label} (Mc = {mc})', method.config, method.grid, fixed)


_TABLE5 = (
  _synchronous('fedavg_fmnist', 'FedAvg'),
  _buffered('fedbuff_fmnist', 'FedBuff'),
  _fully_async('fedfa_delta_fmnist', 'FedFa-Delta'),
)

TABLE5 = spec.Experiment(
  key='table5_mc',
  title=f'Table 5: sensitivity to the concurrency Mc ({MC_LOW} vs {MC_HIGH})',
  ref='Table 5',
  setting=SETTING.replace(
    'Mc = 10 training at once', f'Mc = {MC_LOW} or {MC_HIGH} training at once'
  ),
  base=spec.keeping(scaled, 'schedule.concurrency'),
  methods=tuple(_at_mc(m, mc) for m in _TABLE5 for mc in (MC_LOW, MC_HIGH)),
  claims=tuple(
    spec.Claim(
      'Table 5',
      f'all the algorithms lose accuracy as Mc increases ({name}: Mc = {MC_LOW} beats '
      f'Mc = {MC_HIGH})',
      f'{name} (Mc = {MC_LOW})',
      f'{name} (Mc = {MC_HIGH})',
    )
    for name in ('FedAvg', 'FedBuff', 'FedFa-Delta')
  )
  + tuple(
    spec.Claim(
      'Table 5',
      f'FedFa-Delta is less sensitive to Mc than {name} (a smaller accuracy drop from '
      f'Mc = {MC_LOW} to {MC_HIGH})',
      f'FedFa-Delta (Mc = {MC_HIGH})',
      f'{name} (Mc = {MC_HIGH})',
      baseline=(f'FedFa-Delta (Mc = {MC_LOW})', f'{name} (Mc = {MC_LOW})'),
    )
    for name in ('FedAvg', 'FedBuff')
  ),
  deviations=(
    'As Tables 2-3; every method tuned on the same 5-value client-rate grid at each Mc '
    f'(FedFa-Delta on {list(DELTA_LRS)}).',
    'The paper reports the best accuracy within a fixed time; here the final accuracy '
    f'after the same {UPDATES} client updates. FedBuff keeps its buffer of 5 at both Mc '
    '(at Mc = 5 its server steps then wait for every running client).',
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
