"""End-to-end: build + train_and_evaluate on a tiny config, resume, validation, NaN stop."""

import hashlib
import json
import os

import flax.linen as nn
import numpy as np
import pytest
from ml_collections.config_flags import config_path

from afl_jax import algorithms, data, models, schedules
from afl_jax.errors import ConfigError, UserError
from afl_jax.pipeline import build_run, loop, metrics_io
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline.build import build_schedule


def tiny(**overrides):
  c = config_lib.default()
  c.dataset, c.num_clients, c.local_steps, c.batch_size = 'digits', 12, 4, 16
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.hparams = {'client_lr': 0.1, 'server_lr': 1.0}
  c.num_rounds, c.eval_every, c.eval_train_samples = 30, 10, 300
  for k, v in overrides.items():
    config_path.set_value(k, c, v)
  return c


def set_fields(c, fields):
  """``c`` with ``{'a.b': value}`` set, new names included (a config a user mistyped)."""
  for field, value in fields.items():
    section, _, name = field.partition('.')
    with c.unlocked() if not name else c[section].unlocked():
      (c[section] if name else c)[name or section] = value
  return c


def test_end_to_end_outputs_and_learning(tmp_path):
  summary = loop.train_and_evaluate(tiny(), str(tmp_path), log=lambda *_: None)
  for name in ('config.json', 'schedule.npz', 'metrics.jsonl', 'plot.png', 'summary.json'):
    assert (tmp_path / name).exists(), name
  assert list((tmp_path / 'tensorboard').iterdir())  # TensorBoard event files too
  saved = json.loads((tmp_path / 'config.json').read_text())
  assert saved['compressor']['kind'] == 'none'
  assert set(saved['hparams']) == set(algorithms.ALGORITHMS.defaults('fedbuff'))  # resolved
  records = metrics_io.read_metrics(tmp_path)
  assert [r['step'] for r in records] == [0, 10, 20, 30]
  assert summary['status'] == 'completed'
  assert records[0]['test_accuracy'] < 0.3 < 0.6 < summary['test_accuracy']  # chance is 0.1
  assert records[-1]['bytes_up'] > records[1]['bytes_up'] > 0
  assert all(np.isfinite(r['grad_norm']) for r in records)
  assert 'tau_avg' in records[-1] and records[-1]['wall_clock'] > 0


# One class of error: a config value no run can use, refused before compute in one line
# naming its field (carried by the error, not read back from its message).
INVALID = [
  ({'num_rounds': 0}, r'num_rounds=0 is invalid: must be an integer >= 1'),
  ({'seed': 2**32}, r'seed=4294967296 is invalid: must be an integer in'),
  ({'num_clients': 0}, r'num_clients=0 is invalid'),
  ({'num_clients': 5000}, r'num_clients=5000 is invalid: must be <= 1438, the training samples'),
  ({'local_steps': 0}, r'local_steps=0 is invalid: must be an integer >= 1'),
  ({'checkpoint_every': 15}, r'checkpoint_every=15 is invalid'),
  ({'dirichlet_alpha': 0.0}, r'dirichlet_alpha=0.0 is invalid: must be > 0'),
  ({'dirichlet_alpha': float('nan')}, r'dirichlet_alpha=nan is invalid: must be a finite'),
  ({'algorithm': 'fedmagic'}, r"algorithm='fedmagic' is invalid: must be one of \["),
  ({'dataset': 'imagenet'}, r"dataset='imagenet' is invalid: must be one of \["),
  ({'model': 'vit'}, r"model='vit' is invalid: must be one of \["),
  ({'unlabeled_source': 'Heldout'}, r"unlabeled_source='Heldout' is invalid: .*'heldout'"),
  ({'unlabeled_source': 'digits', 'unlabeled_size': 2000},
   r'unlabeled_size=2000 is invalid: must be an integer in \[0, 1797\]'),
  ({'hparams.client_lr': -0.1}, r'hparams.client_lr=-0.1 is invalid: must be > 0\.$'),
  ({'hparams.momentum': 0.9}, r"hparams.momentum=0.9 is invalid: algorithm 'fedbuff' takes no "),
  ({'schedule.kind': 'magic'}, r"schedule.kind='magic' is invalid"),
  ({'schedule.buffer_size': 5},
   r'schedule.buffer_size=5 is invalid: must be an integer in \[1, 4\] \(concurrency=4\)'),
  ({'schedule.windw': 3}, r"schedule.windw=3 is invalid: schedule 'fedbuff' takes no setting"),
  ({'schedule.kind': 'port', 'schedule.staleness_bound': 0},
   r'schedule.staleness_bound=0 is invalid: must be an integer >= 1'),
  ({'schedule.kind': 'random_staleness', 'schedule.local_steps_multipliers': '1,0'},
   r"schedule.local_steps_multipliers='1,0' is invalid: must be a string \(''"),
  ({'schedule.durations': 'gamma'}, r"schedule.durations='gamma' is invalid"),
  ({'schedule.client_speed': 'fast'}, r"schedule.client_speed='fast' is invalid: must be one of"),
  ({'schedule.client_speed': 'lognormal', 'schedule.client_speed_sigma': 0.0},
   r'schedule.client_speed_sigma=0.0 is invalid: must be > 0'),
  ({'schedule.kind': 'random_staleness', 'schedule.client_speed': 'local_steps'},
   r"schedule.client_speed='local_steps' is invalid: must be 'none' for schedule.kind='random_"),
  ({'compressor.kind': 'qsgd', 'compressor.bits': 1},
   r'compressor.bits=1 is invalid: must be an integer in \[2, 32\]'),
  ({'compressor.kind': 'top_k', 'compressor.fractoin': 0.1},
   r"compressor.fractoin=0.1 is invalid: compressor 'top_k' takes no"),
  ({'compressor.kind': 'zip'}, r"compressor.kind='zip' is invalid: must be one of \["),
  ({'local_step_buckets': -2}, r'local_step_buckets=-2 is invalid: must be an integer >= -1'),
  ({'compute_dtype': 'int8'}, r"compute_dtype='int8' is invalid: must be one of \('dtype', "),
  ({'client_block_size': 4, 'local_step_buckets': 2},
   r'local_step_buckets=2 is invalid: must be -1 or 0 with client_block_size=4'),
  # A setting the chosen kind does not read, as a sweep refuses such an axis.
  ({'compressor.error_feedback': True},
   r"compressor.error_feedback=True is invalid: compressor.kind='none' does not read it"),
  ({'compressor.fraction': 0.1},
   r"compressor.fraction=0.1 is invalid: compressor.kind='none' does not read it"),
  ({'schedule.kind': 'random_staleness', 'schedule.buffer_size': 3},
   r"schedule.buffer_size=3 is invalid: schedule.kind='random_staleness' does not read it"),
]  # fmt: skip


class _BatchNormModel(nn.Module):
  num_classes: int = 10

  @nn.compact
  def __call__(self, x):
    x = nn.BatchNorm(use_running_average=False)(x.reshape((x.shape[0], -1)))
    return nn.Dense(self.num_classes)(x)


class _DropoutModel(nn.Module):
  num_classes: int = 10

  @nn.compact
  def __call__(self, x):
    x = nn.Dropout(0.5, deterministic=False)(x.reshape((x.shape[0], -1)))
    return nn.Dense(self.num_classes)(x)


@pytest.mark.parametrize(
  'model,match',
  [
    (_BatchNormModel, r"keeps state beside its params \(collections \['batch_stats'\]"),
    (_DropoutModel, r'draws random numbers \(dropout'),
  ],
)
def test_a_model_with_state_or_random_streams_is_refused_before_anything_is_written(
  tmp_path, model, match
):
  models.MODELS.register('stateful_test_model', model, replace=True)
  try:
    said = "^config.model='stateful_test_model' is invalid: .*" + match
    with pytest.raises(ConfigError, match=said):
      loop.train_and_evaluate(tiny(model='stateful_test_model'), str(tmp_path), log=print)
  finally:
    models.MODELS.unregister('stateful_test_model')
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize('fields,match', INVALID)
def test_invalid_configs_are_rejected_before_compute(tmp_path, fields, match):
  c = set_fields(tiny(), fields)
  with pytest.raises(ConfigError, match='^config.' + match) as info:
    loop.train_and_evaluate(c, str(tmp_path / 'w'), log=lambda *_: None)
  assert info.value.field == list(fields)[-1] and '\n' not in str(info.value)
  assert not (tmp_path / 'w' / 'metrics.jsonl').exists()


@pytest.mark.parametrize(
  'overrides,field',
  [
    ({'partition': 'shards', 'shards_per_client': 200}, 'shards_per_client'),
    ({'dirichlet_alpha': 1e-4, 'num_clients': 100, 'schedule.concurrency': 4}, 'dirichlet_alpha'),
    ({'dataset': 'fmnist', 'data_dir': '/nonexistent'}, 'data_dir'),
    ({'schedule.kind': 'waiting_windows', 'schedule.wait_seconds': 0.001,
      'schedule.durations': 'constant', 'schedule.durations_params': {'value': 5.0}},
     'schedule.wait_seconds'),
  ],
)  # fmt: skip
def test_errors_found_while_building_carry_their_field(overrides, field):
  with pytest.raises(UserError, match=rf'^config\.{field}=') as info:
    build_run(config_lib.resolve(tiny(**overrides)))  # resolved: the other kinds' fields gone
  assert getattr(info.value, 'field', field) == field  # (the data's errors: DataError)


def test_a_factory_rejecting_a_combination_blames_the_algorithm_section():
  @algorithms.register('test_combination')
  def factory(client_lr=0.1, server_lr=1.0):
    raise ValueError('client_lr and server_lr cannot both be 0.1 and 1.0')

  try:
    c = tiny()
    config_lib.set_algorithm(c, 'test_combination')
    with pytest.raises(ConfigError, match=r"^config.algorithm='test_combination' is invalid: cl"):
      build_run(c)
  finally:
    algorithms.ALGORITHMS.unregister('test_combination')


def test_client_speed_local_steps_scales_each_job_by_its_work():
  # Fully asynchronous, every client always busy, constant unit durations: a client's
  # job takes K_i / mean(K) seconds, so K=1 clients report twice as often as K=2.
  schedule = {'kind': 'fully_async', 'concurrency': 4, 'durations': 'constant'}
  schedule |= {'durations_params': {'value': 1.0}, 'client_speed': 'local_steps'}
  c = tiny(num_clients=4, num_rounds=300, **{f'schedule.{k}': v for k, v in schedule.items()})
  config_lib.validate(c)
  k = np.array([1, 1, 2, 2])
  counts = build_schedule(c, k).participation_counts
  np.testing.assert_allclose(counts[:2] / counts[2:], 2.0, rtol=0.02)
  c.schedule.client_speed = 'none'
  counts = build_schedule(c, k).participation_counts
  assert counts.max() - counts.min() <= 1


def test_client_speed_lognormal_is_seeded_and_changes_the_schedule():
  factors = schedules.durations.speed_factors
  speeds = lambda seed: factors('lognormal', np.full(50, 3), sigma=0.5, seed=seed)
  a = speeds(7)
  np.testing.assert_array_equal(a, speeds(7))
  assert not np.array_equal(a, speeds(8))
  assert np.all(a > 0) and abs(np.log(a).std() - 0.5) < 0.15
  c = tiny(num_rounds=40, **{'schedule.client_speed': 'lognormal'})
  slow = build_schedule(c, np.full(12, 4))
  c.schedule.client_speed = 'none'
  plain = build_schedule(c, np.full(12, 4))
  assert not np.array_equal(slow.client_ids, plain.client_ids)


@pytest.mark.skipif(
  not os.path.isdir('/usr/share/datasets/fashion-mnist'),
  reason='Debian package dataset-fashion-mnist not installed',
)
def test_fmnist_short_run(tmp_path):
  c = tiny(dataset='fmnist', train_subset=4000, num_clients=20, model='logreg')
  c.hparams = {'client_lr': 0.05, 'server_lr': 1.0}
  summary = loop.train_and_evaluate(c, str(tmp_path), log=lambda *_: None)
  assert summary['test_accuracy'] > 0.5


def test_build_lays_out_the_same_client_rows_as_make_federated():
  c = tiny(num_clients=7)
  run = build_run(c)
  shared = run.problem.shared
  assert set(shared) == {'x', 'y', 'index'}
  digits = data.load_digits(seed=c.seed)
  fed = data.make_federated(digits, 'dirichlet', 7, alpha=c.dirichlet_alpha, seed=c.seed)
  x, y, index = (np.asarray(shared[k]) for k in ('x', 'y', 'index'))
  np.testing.assert_array_equal(x[index], fed.x)
  np.testing.assert_array_equal(y[index], fed.y)
  np.testing.assert_array_equal(run.data.offsets, fed.offsets)
  np.testing.assert_array_equal(run.problem.client_sizes, fed.sizes)
  assert run.info.num_clients == 7 and run.info.local_steps == c.local_steps


def test_validation_set_is_held_out_and_reported():
  c = tiny(validation_size=200)
  run = build_run(c)
  owned = set(run.data.index.tolist())
  assert len(run.data.val_y) == 200 and len(owned) == len(run.data.y) - 200
  ev = run.evaluator(run.params0)
  assert {'val_accuracy', 'val_loss', 'test_accuracy'} <= set(ev) and 0 <= ev['val_accuracy'] <= 1
  # Rows held out for validation belong to no client.
  val_rows = np.flatnonzero(~np.isin(np.arange(len(run.data.y)), run.data.index))
  np.testing.assert_array_equal(run.data.x[val_rows], run.data.val_x)


@pytest.mark.parametrize(
  'partition,digest',
  [('dirichlet', 'e841fa49d825f1de'), ('shards', '3c452549f276aae1'), ('iid', '4698bf88eda87368')],
)
def test_layout_gives_clients_the_rows_of_the_former_layout(partition, digest):
  # SHA-256 prefixes of (index, offsets, sizes), recorded from the client-ordered
  # make_federated of commit 89e03b5 (before the views-into-one-array layout): the
  # same seed gives every client the same rows, so runs keep their bits. (They rest on
  # NumPy's PCG64 streams, which NumPy keeps stable.)
  lay = data.federate(data.load_digits(seed=0), partition, 7, alpha=0.5, seed=3, unlabeled_size=100)
  parts = [lay.index, lay.offsets, lay.sizes]
  got = hashlib.sha256(np.concatenate([p.astype(np.int64) for p in parts]).tobytes())
  assert got.hexdigest()[:16] == digest
