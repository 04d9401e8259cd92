"""Every config in configs/ loads and passes validation (before any compute)."""

import importlib.util
import pathlib

import pytest

import afl_jax
from afl_jax.pipeline import config as config_lib

ROOT = pathlib.Path(__file__).parent.parent
CONFIGS = sorted(p for p in (ROOT / 'configs').glob('*.py') if 'def get_config' in p.read_text())


def _load(path):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def test_there_are_configs():
  assert len(CONFIGS) >= 4
  assert {'fedbuff_topk_ef_fmnist', 'fedfa_qsgd_fmnist'} <= {p.stem for p in CONFIGS}


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_config_is_valid(path):
  c = config_lib.resolve(_load(path))
  config_lib.validate(c)
  # Every hyperparameter the algorithm takes is listed, so each is settable on the
  # command line (--config.hparams.NAME=VALUE).
  assert set(config_lib.default_hparams(c.algorithm)) <= set(c.hparams)


def test_compression_configs_wrap_plain_algorithms():
  topk = _load(ROOT / 'configs' / 'fedbuff_topk_ef_fmnist.py')
  assert (topk.algorithm, topk.compressor.kind, topk.compressor.error_feedback) == (
    'fedbuff',
    'top_k',
    True,
  )
  qsgd = _load(ROOT / 'configs' / 'fedfa_qsgd_fmnist.py')
  assert (qsgd.algorithm, qsgd.compressor.kind, qsgd.compressor.bits) == ('fedfa_delta', 'qsgd', 4)


def test_every_registered_algorithm_is_documented():
  doc = (ROOT / 'docs' / 'algorithms.md').read_text()
  missing = [n for n in afl_jax.algorithms.names() if f'`{n}`' not in doc]
  assert not missing, f'add these to docs/algorithms.md: {missing}'
