"""Every config in configs/ loads and passes validation (before any compute)."""

import importlib.util
import pathlib

import pytest

from afl_jax import config as config_lib

CONFIGS = sorted((pathlib.Path(__file__).parent.parent / 'configs').glob('*.py'))


def _load(path):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def test_there_are_configs():
  assert len(CONFIGS) >= 4


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_config_is_valid(path):
  config_lib.validate(_load(path))


def test_every_registered_algorithm_is_documented():
  import afl_jax

  doc = (pathlib.Path(__file__).parent.parent / 'docs' / 'algorithms.md').read_text()
  missing = [n for n in afl_jax.algorithms.names() if f'`{n}`' not in doc]
  assert not missing, f'add these to docs/algorithms.md: {missing}'
