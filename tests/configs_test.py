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
