"""A component's settings section (``model_args``, ``dataset_args``,
``schedule.durations_params``) reaches its factory, is recorded with the defaults of the
rest, and a bad value is refused in one line naming its field."""

import json

import ml_collections
import numpy as np
import pytest

from afl_jax import checks, data
from afl_jax.errors import ConfigError
from afl_jax.pipeline import build, cli, loop, sweep
from afl_jax.pipeline import config as config_lib
from afl_jax.schedules import durations

CALLS = []  # the keyword arguments each call of the loader below received


def toy_loader(*, data_dir=None, download=False, seed=0, noise=0.5, points=400):
  CALLS.append({'data_dir': data_dir, 'seed': seed, 'noise': noise, 'points': points})
  rng = np.random.default_rng(7)
  y = rng.integers(0, 2, size=points).astype(np.int32)
  x = (y[:, None] * 2.0 - 1.0 + noise * rng.normal(size=(points, 6))).astype(np.float32)
  cut = points * 3 // 4
  return data.ArrayDataset(x[:cut], y[:cut], x[cut:], y[cut:], num_classes=2)


@pytest.fixture
def toy():
  data.DATASETS.register(
    'toy_sections', toy_loader, noise=checks.real(0.0), points=checks.integer(40)
  )
  CALLS.clear()
  yield
  data.DATASETS.unregister('toy_sections')


def _config():
  c = config_lib.default()
  c.dataset, c.model = 'toy_sections', 'mlp'
  c.num_clients, c.partition = 4, 'iid'
  c.local_steps, c.batch_size = 2, 8
  c.num_rounds, c.eval_every, c.eval_train_samples = 2, 1, 50
  c.schedule.kind, c.schedule.clients_per_step = 'synchronous', 2
  return c


def test_settings_reach_the_loader_and_the_model_and_are_recorded(toy, tmp_path):
  c = _config()
  c.dataset_args.noise = 0.25  # given; points: the loader's default
  c.model_args.hidden_sizes = [7, 3]
  run = build.build_run(c)
  assert CALLS[-1] == {'data_dir': None, 'seed': 0, 'noise': 0.25, 'points': 400}
  assert run.model.hidden_sizes == (7, 3)
  kernels = [p['kernel'].shape for p in run.params0['params'].values()]
  assert kernels == [(6, 7), (7, 3), (3, 2)]  # 6 features, 2 classes
  # The data is the loader's with noise 0.25 (an independent draw of the same arrays).
  expected = toy_loader(noise=0.25)
  assert sorted(run.data.x[run.data.index].ravel().tolist()) == sorted(
    expected.train_x.ravel().tolist()
  )
  loop.train_and_evaluate(c, str(tmp_path), log=lambda *_: None)
  recorded = json.loads((tmp_path / 'config.json').read_text())
  assert recorded['dataset_args'] == {'noise': 0.25, 'points': 400}
  assert recorded['model_args'] == {'hidden_sizes': [7, 3]}
  assert recorded['schedule']['durations_params'] == {'low': 0.0, 'high': 20.0}


@pytest.mark.parametrize(
  ('field', 'value', 'message'),
  [
    ('dataset_args.noise', -1.0, r'^config.dataset_args.noise=-1.0 is invalid: must be >= 0'),
    ('dataset_args.points', 10, r'^config.dataset_args.points=10 is invalid: must be an integer'),
    ('dataset_args.nois', 1.0, r"^config.dataset_args.nois=1.0 is invalid: dataset 'toy_sections'"),
    ('model_args.hidden_sizes', [0], r'^config.model_args.hidden_sizes=\[0\] is invalid: must be'),
    ('model_args.width', 3, r"^config.model_args.width=3 is invalid: model 'mlp' takes no"),
  ],
)
def test_a_bad_setting_is_refused_naming_its_field(toy, field, value, message):
  c = _config()
  section, arg = field.split('.')
  c[section][arg] = value
  with pytest.raises(ConfigError, match=message) as e:
    build.build_run(c)
  assert e.value.field == field and '\n' not in str(e.value)
  assert not CALLS  # refused before the data is loaded


def test_model_settings_that_do_not_fit_the_data_are_one_line(toy):
  c = _config()
  c.model = 'cnn'  # 28x28x1 images expected; the toy data has 6 features
  with pytest.raises(ConfigError, match=r"^config.model_args=.* is invalid: model 'cnn' cannot"):
    build.build_run(c)


def test_a_model_or_dataset_sweep_swaps_the_name_and_its_settings(toy):
  c = _config()
  c.model_args.hidden_sizes = (9,)
  c.sweep = ml_collections.ConfigDict(
    {'model': ['logreg', {'name': 'mlp', 'hidden_sizes': [5]}], 'seed': [0]}
  )
  config_lib.validate(c)
  points = sweep.grid(c)
  resolved = [config_lib.resolve(sweep.point_config(c, p)) for p in points]
  assert [(r.model, r.model_args.to_dict()) for r in resolved] == [
    ('logreg', {}),  # the base's hidden_sizes=(9,) is not carried over to another entry
    ('mlp', {'hidden_sizes': [5]}),
  ]
  assert [sweep.run_name(p) for p in points] == [
    'model=logreg,seed=0',
    'model=mlp(hidden_sizes=[5]),seed=0',
  ]
  c.sweep = ml_collections.ConfigDict({'dataset': [{'name': 'toy_sections', 'noise': -1.0}]})
  with pytest.raises(ConfigError, match=r'^config.sweep.dataset entry .*dataset_args.noise=-1.0'):
    sweep.validate_sweep(c)
  c.sweep = ml_collections.ConfigDict({'dataset_args': {'noise': [0.1, 0.2]}})
  sweep.validate_sweep(c)
  runs = [build.build_run(sweep.point_config(c, p)) for p in sweep.grid(c)]
  assert [r.config.dataset_args.noise for r in runs] == [0.1, 0.2]
  assert [call['noise'] for call in CALLS[-2:]] == [0.1, 0.2]


def test_command_line_sets_the_settings_of_the_named_components():
  c = config_lib.default()
  c.schedule.durations = 'normal'
  c.schedule.durations_params = {'mean': 4.0, 'std': 1.0}
  pending = [('model_args.hidden_sizes', '(5, 6)'), ('schedule.durations_params.std', '2')]
  out = cli.finish_config(c, pending)
  assert out.model_args.hidden_sizes == (5, 6)
  assert out.schedule.durations_params.to_dict() == {'mean': 4.0, 'std': 2.0}
  with pytest.raises(ConfigError, match=r"^config.model_args.hidden='5' is invalid: model 'mlp'"):
    cli.finish_config(c, [('model_args.hidden', '5')])


def test_durations_params_are_the_distributions_own_resolved_and_recorded():
  c = config_lib.default()
  c.schedule.durations_params = {'low': 2.0}
  assert config_lib.resolve(c).schedule.durations_params.to_dict() == {'low': 2.0, 'high': 20.0}
  c.schedule.durations, c.schedule.durations_params = 'constant', {'value': 3.0}
  assert config_lib.resolve(c).schedule.durations_params.to_dict() == {'value': 3.0}
  config_lib.validate(c)
  s = build.build_schedule(config_lib.resolve(c), np.full(30, 2))
  assert np.all(np.diff(s.wall_clock) >= 0) and set(np.diff(s.wall_clock).round(9)) <= {0.0, 3.0}


@pytest.mark.parametrize(
  ('kind', 'params', 'message'),
  [
    ('uniform', {'low': 5.0, 'high': 1.0}, r'durations_params.high=1.0 is invalid: must be >= 5'),
    ('uniform', {'low': -1.0}, r'durations_params.low=-1.0 is invalid: must be >= 0'),
    ('normal', {'mean': 1.0}, r'^config.schedule.durations_params.std is required'),
    ('exponential', {'mean': 0.0}, r'durations_params.mean=0.0 is invalid: must be > 0'),
    ('lognormal', {'mu': 1.0, 'sigma': float('nan')}, r'durations_params.sigma=nan is invalid'),
    ('constant', {'value': 1.0, 'mean': 2.0}, r"params.mean=2.0 is invalid: .*'constant'"),
  ],
)
def test_durations_params_are_validated_per_distribution(kind, params, message):
  c = config_lib.default()
  c.schedule.durations = kind
  c.schedule.durations_params = params
  with pytest.raises(ConfigError, match=message):
    config_lib.validate(c)


def test_a_string_durations_params_is_refused():
  c = ml_collections.ConfigDict(config_lib.default().to_dict() | {'seed': 0})
  c.schedule = ml_collections.ConfigDict({**c.schedule.to_dict(), 'durations_params': 'low=1'})
  with pytest.raises(ConfigError, match=r'durations_params=.low=1. is invalid: must be a mapping'):
    config_lib.validate(c)


def test_the_draws_use_the_given_parameters():
  """Each distribution draws with its parameters, as NumPy's generator does by hand."""
  ids = np.arange(50)
  cases = [
    ('uniform', {'low': 1.0, 'high': 2.0}, lambda r: r.uniform(1.0, 2.0, 50)),
    ('exponential', {'mean': 3.0}, lambda r: r.exponential(3.0, 50)),
    ('normal', {'mean': 5.0, 'std': 2.0}, lambda r: np.maximum(r.normal(5.0, 2.0, 50), 1e-6)),
    ('lognormal', {'mu': 0.5, 'sigma': 0.2}, lambda r: r.lognormal(0.5, 0.2, 50)),
    ('pareto', {'shape': 2.0, 'scale': 3.0}, lambda r: (r.pareto(2.0, 50) + 1.0) * 3.0),
    ('constant', {'value': 4.0}, lambda r: np.full(50, 4.0)),
  ]
  for kind, params, by_hand in cases:
    got = durations.Durations(kind, params).draw(np.random.default_rng(3), ids)
    np.testing.assert_array_equal(got, by_hand(np.random.default_rng(3)), err_msg=kind)
