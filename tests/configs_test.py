"""Every config in configs/ loads and validates; a wrong table entry name lists the names."""

import pathlib

import pytest

import afl_jax
from afl_jax.pipeline import cli
from afl_jax.pipeline import config as config_lib

ROOT = pathlib.Path(__file__).parent.parent
TABLES = {'fmnist.py': 'CONFIGS', 'paper_cifar10.py': 'PAPERS'}


def _specs():
  out = []
  for path in sorted((ROOT / 'configs').glob('*.py')):
    if path.name in TABLES:
      table = getattr(config_lib.import_beside(str(path), path.stem), TABLES[path.name])
      out += [f'{path}:{name}' for name in table]
    else:
      out.append(str(path))
  return out


SPECS = _specs()


def test_there_are_configs():
  names = {pathlib.Path(s).name for s in SPECS}
  assert {'default.py', 'fmnist.py:fedbuff_topk_ef', 'paper_cifar10.py:fedgm'} <= names
  assert len(names) >= 40


@pytest.mark.parametrize('spec', SPECS, ids=lambda s: pathlib.Path(s).name)
def test_config_is_valid(spec):
  assert cli.check_config_file(spec) is None
  c = config_lib.resolve(config_lib.load_file(spec))
  config_lib.validate(c)
  # Every hyperparameter is listed, so each is settable on the command line.
  assert set(afl_jax.algorithms.ALGORITHMS.defaults(c.algorithm)) <= set(c.hparams)


@pytest.mark.parametrize('file', TABLES)
def test_a_wrong_entry_name_is_one_line_naming_the_valid_ones(file):
  path = str(ROOT / 'configs' / file)
  for spec, says in ((f'{path}:bogus', "has no config 'bogus'"), (path, 'needs a config name')):
    message = cli.check_config_file(spec)
    assert message is not None and '\n' not in message and 'Traceback' not in message
    assert says in message and 'NAME one of ' in message and 'fedgm' in message


def test_every_registered_algorithm_is_documented():
  doc = (ROOT / 'docs' / 'algorithms.md').read_text()
  missing = [n for n in afl_jax.algorithms.names() if f'`{n}`' not in doc]
  assert not missing, f'add these to docs/algorithms.md: {missing}'
