"""Bad inputs on scripts/train.py's command line: one ``error:`` line, exit status 1, nothing
written (what only the script refuses through it, the rest in-process)."""

import functools
import pathlib

import ml_collections
import pytest
from helper_runs import one_error_line, run_train

from afl_jax import algorithms
from afl_jax.errors import ConfigError
from afl_jax.pipeline import cli
from afl_jax.pipeline import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMOKE = str(ROOT / 'configs' / 'digits_smoke.py')


@pytest.mark.parametrize(
  'args,env,expected',
  [
    (
      ['--config.dirichlet_alpha=yes'],
      {},
      "error: config.dirichlet_alpha='yes' is invalid: must be a number.",
    ),
    (['--config.seed=x'], {}, "error: config.seed='x' is invalid: must be an integer."),
    (['--num_processes=0'], {}, 'error: --num_processes=0 is invalid: must be an integer >= 1'),
    (
      ['--config.schedule.durations_params=low=0,high=20'],
      {},
      "error: config.schedule.durations_params='low=0,high=20' is invalid: must be a mapping",
    ),
    (
      ['--num_processes=2', '--process_id=1', '--coordinator=nohostport'],
      {},
      "error: --coordinator='nohostport' is invalid: must be HOST:PORT",
    ),
    # JAX's platform detection on (no JAX_PLATFORMS): its INFO line (no TPU found) stays out.
    (
      ['--config.hparams.client_lr=-1'],
      {'JAX_PLATFORMS': ''},
      'error: config.hparams.client_lr=-1.0 is invalid: must be > 0.',
    ),
  ],
)
def test_the_scripts_own_refusals_are_one_line(tmp_path, monkeypatch, args, env, expected):
  monkeypatch.delenv('JAX_COORDINATOR_ADDRESS', raising=False)
  rc, out = run_train(
    tmp_path / 'w', f'--config={SMOKE}', *args, timeout=120, AFL_JAX_CPU_DEVICES='1', **env
  )
  assert [line for line in out.splitlines() if line.strip()] == [one_error_line(rc, out)], out
  assert one_error_line(rc, out).startswith(expected)
  assert not (tmp_path / 'w' / 'metrics.jsonl').exists()


def _smoke():
  return config_lib.load_file(SMOKE)


@pytest.mark.parametrize(
  'spec,args,expected',
  [
    (SMOKE, ['--config.schedule.kindd=x'], "config.schedule.kindd='x' is invalid: config.schedule"),
    (
      f'{ROOT}/configs/fmnist.py:fedgm',  # an entry of a config file's table
      ['--config.num_rounds=5', '--config.schedule.kindd=x'],
      "config.schedule.kindd='x' is invalid: config.schedule has no field 'kindd'",
    ),
  ],
)
def test_an_override_naming_no_field_is_one_line(spec, args, expected):
  message = cli.unknown_field_message(config_lib.load_file(spec), ['train.py', *args])
  assert message.startswith(expected) and '\n' not in message, message


def test_hparam_override_fills_the_full_set_and_parses_types():
  c = _smoke()
  c.algorithm = 'asynflc'
  out = cli.finish_config(c, [('bits', '4'), ('fraction', '0.1'), ('scaled', 'true')])
  assert out.hparams.bits == 4 and isinstance(out.hparams.bits, int)
  assert out.hparams.fraction == 0.1 and out.hparams.scaled is True
  assert set(out.hparams) == set(algorithms.ALGORITHMS.defaults('asynflc'))
  assert out.hparams.client_lr == c.hparams.client_lr  # given values are kept
  with pytest.raises(ConfigError, match=r"config.hparams.bitz='4' is invalid: .*valid: \["):
    cli.finish_config(c, [('bitz', '4')])


@pytest.mark.parametrize('drop', ['algorithm', 'download'])
def test_a_config_not_built_on_the_default_names_its_missing_field(drop):
  c = _smoke()
  del c[drop]  # a config file not starting from config.default(): one line, not a traceback
  with pytest.raises(ConfigError, match=rf'^config\.{drop} is missing: .*default\(\)$') as e:
    cli.finish_config(c)
  assert e.value.field == drop


@pytest.mark.parametrize(
  'field,value',
  [
    ('dirichlet_alpha', True),
    ('dirichlet_alpha', float('inf')),
    ('schedule.wait_seconds', True),
    ('hparams.client_lr', True),
  ],
)
def test_booleans_and_non_finite_numbers_are_not_floats(field, value):
  d = _smoke().to_dict()  # a config file may build its fields from plain values
  d['schedule']['kind'] = 'waiting_windows'
  *path, last = field.split('.')
  functools.reduce(dict.__getitem__, path, d)[last] = value
  with pytest.raises(ConfigError, match=f'config.{field}={value!r} is invalid'):
    config_lib.validate(ml_collections.ConfigDict(d))
