"""Each component named once with its own settings: sweeps over whole algorithm entries,
the values each run records, one error form for every component kind, users' own
compressors and delay models registered by one function each."""

import json
import re

import numpy as np
import pytest
from experiment_test import set_fields
from sweep_pipeline_test import tiny_config as _base

from afl_jax import checks, compression, schedules
from afl_jax.errors import ConfigError
from afl_jax.pipeline import build, loop, metrics_io, sweep
from afl_jax.pipeline import config as config_lib
from afl_jax.schedules import builders

QUIET = {'log': lambda *_: None}


def _curve(workdir):
  recs = [r for r in metrics_io.read_metrics(workdir) if 'test_loss' in r]
  return [(r['step'], r['test_accuracy'], r['test_loss']) for r in recs]


# ---- sweeps over whole algorithm entries --------------------------------------------------
def test_sweep_over_two_algorithms_runs_each_with_its_own_values(tmp_path):
  c = _base()
  fadas = {'name': 'fadas', 'server_lr': 1e-3, 'beta1': 0.8}
  c.sweep = {'algorithm': ['fedbuff', fadas], 'seed': [0, 1]}
  out = sweep.train_sweep(c, str(tmp_path / 'sweep'), **QUIET)
  assert len(out['runs']) == 4 and len(out['groups']) == 2  # one compile per algorithm
  with open(tmp_path / 'sweep' / 'summary.json') as f:
    records = {r['name']: r for r in json.load(f)['runs']}
  fadas_name = 'algorithm=fadas(beta1=0.8,server_lr=0.001)'
  assert sorted(records) == [
    f'{a},seed={s}' for a in (fadas_name, 'algorithm=fedbuff') for s in (0, 1)
  ]
  # The values each ran with: fedbuff's own defaults (the entry replaces the base's
  # algorithm + hparams), fadas's own defaults plus the entry's two values.
  fb = records['algorithm=fedbuff,seed=1']
  fa = records[f'{fadas_name},seed=1']
  assert fb['algorithm'] == 'fedbuff' and fa['algorithm'] == 'fadas'
  assert fb['config']['hparams'] == {'client_lr': 0.01, 'server_lr': 1.0, 'weighting': 'uniform'}
  hp = fa['config']['hparams']
  assert (hp['server_lr'], hp['beta1'], hp['client_lr'], hp['beta2']) == (1e-3, 0.8, 0.1, 0.99)
  assert fa['config']['seed'] == 1 and fa['config']['sweep'] == {}
  for name, record in records.items():  # and the same in each run's folder
    saved = json.loads((tmp_path / 'sweep' / name / 'config.json').read_text())
    assert saved.pop('identity')['digest'] == record['identity'], name
    assert saved == record['config'], name
  # Each run equals the same algorithm run alone from a config written by hand.
  alone_runs = [('fedbuff', 'algorithm=fedbuff', {}), ('fadas', fadas_name, fadas)]
  for alg, name, hparams in alone_runs:
    name, hparams = f'{name},seed=1', {k: v for k, v in hparams.items() if k != 'name'}
    alone = _base(seed=1)
    config_lib.set_algorithm(alone, alg, **hparams)
    loop.train_and_evaluate(alone, str(tmp_path / alg), **QUIET)
    got, want = _curve(str(tmp_path / 'sweep' / name)), _curve(str(tmp_path / alg))
    assert [g[0] for g in got] == [w[0] for w in want] and len(got) == 3
    np.testing.assert_allclose(np.array(got)[:, 1:], np.array(want)[:, 1:], rtol=1e-5, atol=1e-6)
  # fadas at its recorded server_lr, not fedbuff's 1.0: the two curves differ.
  assert _curve(str(tmp_path / 'fadas')) != _curve(str(tmp_path / 'fedbuff'))


def test_hparams_axis_sweeps_within_each_algorithm_of_the_grid():
  c = _base()
  c.sweep = {'algorithm': ['fedbuff', 'fadas'], 'hparams': {'client_lr': [0.05, 0.1]}}
  points = sweep.grid(c)
  assert len(points) == 4 and sweep.traced_fields(c) == ['hparams.client_lr']
  one = config_lib.resolve(sweep.point_config(c, points[2]))
  assert one.algorithm == 'fadas' and one.hparams.client_lr == 0.05
  assert one.hparams.server_lr == 1e-4  # fadas's own default, not the base's 1.0
  keys = {sweep.group_key(p, sweep.traced_fields(c)) for p in points}
  assert len(keys) == 2  # one compile per algorithm, the rates traced within it


FADAS = {'name': 'fadas', 'server_lr': 1e-4}  # fadas's own default server_lr
SYNC13 = {'kind': 'synchronous', 'clients_per_step': 13}
NOT_RUN = [  # (fields of the config, its sweep, what the one line names)
  ({'partition': 'iid'}, {'dirichlet_alpha': [0.1, 1.0]}, 'does not read dirichlet_alpha'),
  ({'local_epochs': 1}, {'local_steps': [1, 2]},
   'local_steps (1 resolves to 10: another field decides); remove the axis'),
  ({'schedule.kind': 'synchronous'}, {'schedule': {'concurrency': [4, 6]}}, 'schedule.concurrency'),
  ({}, {'compressor': {'fractoin': [0.1]}}, "compressor.fractoin=0.1 is invalid: compressor kind"),
  ({}, {'num_rounds': ['ten']}, 'config.sweep.num_rounds='),
  ({}, {'seed': [0.5]}, 'config.sweep.seed='),
  ({}, {'hparams': {'client_lr': ['fast']}}, 'config.sweep.hparams.client_lr='),
  ({}, {'hparams': {'nope': [1.0]}}, 'config.sweep.hparams.nope'),
  ({}, {'no_such_field': [1]}, 'no_such_field'),
  ({}, {'seed': [0, 0]}, 'same run once resolved (a value given twice); remove the duplicate'),
  ({}, {'hparams': {'client_lr': [0.1, 0.1]}, 'seed': [0]}, 'are the same run'),
  ({}, {'algorithm': ['fadas', FADAS]}, "'algorithm=fadas' and 'algorithm=fadas(server_lr="),
  ({'num_round': 5}, {'seed': [0]}, 'config.num_round is not a field (did you mean num_rounds?)'),
  ({}, {'algorithm': ['fedbuff', 'fadas'], 'hparams': {'beta1': [0.9]}},
   "config.sweep.hparams.beta1 is invalid: 'fedbuff' has no"),
  ({}, {'algorithm': [{'name': 'fadas', 'server_lr': -1.0}]},
   'config.hparams.server_lr=-1.0 is invalid: must be > 0'),
  ({}, {'algorithm': [{'server_lr': 1.0}]},
   "config.sweep.algorithm={'server_lr': 1.0} is invalid: each entry must be"),
  ({}, {'algorithm': [{'name': 'fedbuff', 'schedule': {'buffer_size': 9}}]},
   'schedule.buffer_size=9 is invalid'),
  ({}, {'schedule': [{'kind': 'fedbuff'}]},  # fedbuff's own 20 + 10 - 1 = 29 clients needed
   'config.num_clients=12 is invalid: must be >= concurrency'),
  ({}, {'schedule': [SYNC13]}, 'config.schedule.clients_per_step=13 is invalid: must be'),
  ({}, {'compressor': ['top_k']}, "config.sweep.compressor='top_k' is invalid: each entry"),
  ({'model': 'mlp'}, {'model_args': {'hidden_sizes': [[5], [0]]}},
   'config.sweep.model_args.hidden_sizes=[[5], [0]] is'),
  ({}, {'model': ['logreg', 'mlp'], 'model_args': {'hidden_sizes': [[5]]}},
   "config.sweep.model_args.hidden_sizes is invalid: 'logreg'"),
  ({}, {'model': [3]}, 'config.sweep.model=3 is invalid: each entry must be'),
]  # fmt: skip


@pytest.mark.parametrize('fields,axes,named', NOT_RUN)
def test_a_sweep_that_would_not_run_what_it_says_is_one_line_before_compute(fields, axes, named):
  c = set_fields(_base(), fields)
  c.sweep = axes
  with pytest.raises(ConfigError, match=re.escape(named)):
    sweep.validate_sweep(config_lib.validate(c))
    for p in sweep.grid(c):
      config_lib.validate(sweep.point_config(c, p))


def test_an_algorithm_entry_carries_its_own_schedule_settings():
  c = _base()
  entries = [
    {'name': n, 'schedule': {'buffer_size': b}} for n, b in (('fedasync', 1), ('fedbuff', 3))
  ]
  c.sweep = {'algorithm': entries}
  sweep.validate_sweep(c)
  runs = [build.build_run(sweep.point_config(c, p)) for p in sweep.grid(c)]
  assert [r.config.algorithm for r in runs] == ['fedasync', 'fedbuff']
  assert [r.schedule.max_arrivals for r in runs] == [1, 3]
  assert [sweep.run_name(p) for p in sweep.grid(c)] == [
    'algorithm=fedasync(schedule=(buffer_size=1))',
    'algorithm=fedbuff(schedule=(buffer_size=3))',
  ]


# ---- users' own components ---------------------------------------------------------------
def test_a_users_compressor_is_registered_named_and_recorded(tmp_path):
  @compression.COMPRESSORS.register('test_scaled', scale=checks.real(0.0, 1.0), replace=True)
  def scaled(scale: float = 0.5) -> compression.Compressor:
    inner = compression.identity()
    return inner._replace(compress=lambda u, s, k: (u * scale, s, inner.compress(u, s, k)[2]))

  c = _base()
  c.compressor.kind, c.compressor.scale = 'test_scaled', 2.0
  with pytest.raises(ConfigError, match=r'^config.compressor.scale=2.0 is invalid: must be in'):
    config_lib.validate(c)
  c.compressor.scale = 0.25
  try:
    run = build.build_run(c)
  finally:
    compression.COMPRESSORS.unregister('test_scaled')
  assert 'test_scaled' not in compression.COMPRESSORS.names()
  want = {'kind': 'test_scaled', 'error_feedback': False, 'scale': 0.25}
  assert dict(run.config.compressor) == want
  msg, _, _ = run.algorithm.compressor.compress(np.ones(3, np.float32), None, None)
  np.testing.assert_array_equal(msg, np.full(3, 0.25, np.float32))


def test_a_delay_model_is_one_function_and_its_registration():
  @schedules.SCHEDULES.register(
    'test_lockstep', slots='cohort', cohort=checks.integer(1, 'num_clients'), replace=True
  )
  def lockstep(ctx: schedules.ScheduleContext, cohort: int = 3) -> schedules.Schedule:
    return builders.synchronous(
      ctx.num_clients, cohort, ctx.num_steps, local_steps=ctx.local_steps, seed=ctx.seed
    )

  assert not schedules.registry.draws_durations('test_lockstep')
  assert schedules.registry.draws_durations('fedbuff')  # takes `durations`: derived
  c = _base()
  c.schedule.kind = 'test_lockstep'
  r = config_lib.resolve(c)
  assert dict(r.schedule) == {'kind': 'test_lockstep', 'seed': -1, 'cohort': 3}
  c.schedule.cohort = 13
  said = r'^config.schedule.cohort=13 is invalid: must be an integer in \[1, 12\] \(num_clients'
  with pytest.raises(ConfigError, match=said):
    config_lib.validate(c)
  c.schedule.cohort = 4
  try:
    run = build.build_run(config_lib.resolve(c))  # fedbuff's settings dropped
  finally:
    schedules.SCHEDULES.unregister('test_lockstep')
  assert run.schedule.client_ids.shape == (8, 4)  # T x M, M from the declared slots
  assert np.all(np.asarray(run.schedule.mask))


def test_schedule_and_compressor_axes_sweep_whole_entries():
  c = _base()
  c.schedule.seed = 7
  sync = {'kind': 'synchronous', 'clients_per_step': 4}
  fedbuff = {'kind': 'fedbuff', 'concurrency': 8, 'buffer_size': 2}
  compressors = [{'kind': 'none'}, {'kind': 'top_k'}]
  c.sweep = {'schedule': [fedbuff, sync], 'compressor': compressors}
  sweep.validate_sweep(c)
  points = {sweep.run_name(p): p for p in sweep.grid(c)}
  kinds = ('fedbuff(buffer_size=2,concurrency=8)', 'synchronous(clients_per_step=4)')
  assert sorted(points) == [
    f'compressor={k},schedule={s}' for k in ('none', 'top_k') for s in kinds
  ]
  last = points['compressor=top_k,schedule=synchronous(clients_per_step=4)']
  one = config_lib.resolve(sweep.point_config(c, last))
  # The entry replaces the section (the base's concurrency 6 and buffer 3 are not kept),
  # keeping only its section-level seed; the kind's own defaults fill the rest.
  first = points['compressor=none,schedule=fedbuff(buffer_size=2,concurrency=8)']
  first = config_lib.resolve(sweep.point_config(c, first)).schedule
  assert (first.concurrency, first.buffer_size, first.seed, first.durations) == (8, 2, 7, 'uniform')
  want = {'kind': 'synchronous', 'seed': 7, 'clients_per_step': 4, 'durations': 'uniform'}
  want |= {'durations_params': {'low': 0.0, 'high': 20.0}, 'client_speed': 'none'}
  assert one.schedule.to_dict() == want | {'client_speed_sigma': 0.5}
  assert dict(one.compressor) == {'kind': 'top_k', 'error_feedback': False, 'fraction': 0.03}
  assert build.build_run(sweep.point_config(c, last)).schedule.client_ids.shape == (8, 4)
