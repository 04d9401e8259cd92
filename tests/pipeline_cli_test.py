"""Bad inputs through scripts/train.py: one ``error:`` line, non-zero exit, no traceback.

Each case is one subprocess that stops before any compute (a few seconds each).
"""

import pathlib

import pytest
from helper_runs import one_error_line, run_train

from afl_jax.errors import ConfigError
from afl_jax.pipeline import cli
from afl_jax.pipeline import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMOKE = str(ROOT / 'configs' / 'digits_smoke.py')


def _train(tmp_path, *args):
  rc, out = run_train(
    tmp_path / 'w', f'--config={SMOKE}', *args, timeout=120, AFL_JAX_CPU_DEVICES='1'
  )
  line = one_error_line(rc, out)
  assert not (tmp_path / 'w' / 'metrics.jsonl').exists()
  return line


@pytest.mark.parametrize(
  'args,expected',
  [
    # config values
    (['--config.num_rounds=0'], 'error: config.num_rounds=0 is invalid: must be an integer >= 1'),
    (['--config.dirichlet_alpha=nan'], 'error: config.dirichlet_alpha=nan is invalid: must be a'),
    (['--config.seed=4294967296'], 'error: config.seed=4294967296 is invalid: must be an integer'),
    (['--config.dirichlet_alpha=yes'], "error: config.dirichlet_alpha='yes' is invalid"),
    # command line: unknown field, misspelled or foreign hyperparameter
    (['--config.schedule.kindd=x'], "error: config.schedule.kindd='x' is invalid: config.schedule"),
    (['--config.hparams.client_lrr=0.1'], "error: config.hparams.client_lrr='0.1' is invalid"),
    # --config.hparams.bits=4 is accepted (asynflc takes it) though the file does not name it:
    # the run then stops on the next bad field, not on bits.
    (
      ['--config.algorithm=asynflc', '--config.hparams.bits=4', '--config.num_rounds=0'],
      'error: config.num_rounds=0 is invalid',
    ),
    # an entry of a config file's table: a wrong name lists the valid ones; overrides apply
    (
      ['--config=configs/fmnist.py:bogus'],
      "error: --config='configs/fmnist.py:bogus' is invalid: configs/fmnist.py has no config "
      "'bogus': give --config=configs/fmnist.py:NAME, NAME one of masfl, adamasfl,",
    ),
    (
      ['--config=configs/fmnist.py:fedgm', '--config.schedule.kindd=x'],
      "error: config.schedule.kindd='x' is invalid: config.schedule has no field 'kindd'",
    ),
    # data, partition, schedule
    (
      ['--config.dataset=fmnist', '--config.data_dir=/nonexistent'],
      "error: config.data_dir='/nonexistent' is invalid: Fashion-MNIST not found",
    ),
    (
      ['--config.partition=shards', '--config.shards_per_client=100'],
      'error: config.shards_per_client=100 is invalid: partition',
    ),
    (
      [
        '--config.schedule.kind=waiting_windows',
        '--config.schedule.wait_seconds=0.001',
        '--config.schedule.durations=constant',
        '--config.schedule.durations_params.value=5',
      ],
      'error: config.schedule.wait_seconds=0.001 is invalid: no client ever arrives',
    ),
  ],
)
def test_user_error_is_one_line(tmp_path, args, expected):
  assert _train(tmp_path, *args).startswith(expected)


def _smoke():
  import importlib.util

  spec = importlib.util.spec_from_file_location('smoke', SMOKE)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def test_hparam_override_fills_the_full_set_and_parses_types(monkeypatch):
  c = _smoke()
  c.algorithm = 'asynflc'
  monkeypatch.setattr(cli, '_pending', [('bits', '4'), ('fraction', '0.1'), ('scaled', 'true')])
  out = cli.finish_config(c)
  assert out.hparams.bits == 4 and isinstance(out.hparams.bits, int)
  assert out.hparams.fraction == 0.1 and out.hparams.scaled is True
  assert set(out.hparams) == set(config_lib.default_hparams('asynflc'))
  assert out.hparams.client_lr == c.hparams.client_lr  # given values are kept
  monkeypatch.setattr(cli, '_pending', [('bitz', '4')])
  with pytest.raises(ConfigError, match=r"config.hparams.bitz='4' is invalid: .*valid: \["):
    cli.finish_config(c)


@pytest.mark.parametrize(
  'field,value',
  [('dirichlet_alpha', True), ('dirichlet_alpha', float('inf')), ('schedule.wait_seconds', True)],
)
def test_booleans_and_non_finite_numbers_are_not_floats(field, value):
  import ml_collections

  d = _smoke().to_dict()  # a config file may build its fields from plain values
  d['schedule']['kind'] = 'waiting_windows'
  node, *path = d, *field.split('.')
  for part in path[:-1]:
    node = node[part]
  node[path[-1]] = value
  c = ml_collections.ConfigDict(d)
  with pytest.raises(ConfigError, match=f'config.{field}={value!r} is invalid: must be a finite'):
    config_lib.validate(c)


def test_boolean_hparam_where_a_float_is_meant():
  c = _smoke()
  c.hparams = {'client_lr': True, 'server_lr': 1.0}
  with pytest.raises(ConfigError, match='config.hparams.client_lr=True is invalid'):
    config_lib.validate(c)


@pytest.mark.parametrize(
  'args,expected',
  [
    (['--num_processes=0'], 'error: --num_processes=0 is invalid: must be an integer >= 1'),
    (
      ['--num_processes=2', '--process_id=5'],
      'error: --process_id=5 is invalid: must be in [0, 1] (--num_processes=2)',
    ),
    (
      ['--num_processes=2', '--process_id=1', '--coordinator=nohostport'],
      "error: --coordinator='nohostport' is invalid: must be HOST:PORT",
    ),
    (['--num_processes=2'], "error: --coordinator='' is invalid with --num_processes=2"),
  ],
)
def test_bad_process_flags_are_one_line_before_jax_starts(tmp_path, args, expected, monkeypatch):
  monkeypatch.delenv('JAX_COORDINATOR_ADDRESS', raising=False)
  assert _train(tmp_path, *args).startswith(expected)


def test_an_error_after_jax_starts_is_the_only_line_with_platform_detection_on(tmp_path):
  """With JAX's platform detection on (no JAX_PLATFORMS), JAX logs an INFO line when it
  finds no TPU; the scripts keep it out of the output, and --verbosity=0 shows it."""
  args = (f'--config={SMOKE}', '--config.hparams.client_lr=-1')
  rc, out = run_train(tmp_path / 'w', *args, timeout=120, JAX_PLATFORMS='', AFL_JAX_CPU_DEVICES='1')
  assert [line for line in out.splitlines() if line.strip()] == [
    'error: config.hparams.client_lr=-1.0 is invalid: must be > 0.'
  ], out
  assert rc == 1
  rc, out = run_train(
    tmp_path / 'v', *args, '--verbosity=0', timeout=120, JAX_PLATFORMS='', AFL_JAX_CPU_DEVICES='1'
  )
  assert rc == 1 and out.count('error:') == 1, out
