"""A sweep records cumulative bytes up/down per replica, as a single run does."""

import ml_collections
import pytest
from sweep_pipeline_test import _config as sweep_config

from afl_jax.pipeline import loop, metrics_io, sweep


def _config():
  c = sweep_config()
  c.validation_size = 0
  c.compressor.kind = 'top_k'  # bits per upload differ from the dense download
  c.sweep = ml_collections.ConfigDict({'seed': [0, 1]})
  return c


def test_sweep_records_bytes_like_a_single_run(tmp_path):
  c = _config()
  out = sweep.train_sweep(c, str(tmp_path / 'sweep'), log=lambda *_: None)
  alone = loop.train_and_evaluate(
    sweep.point_config(c, {'seed': 1}), str(tmp_path / 'alone'), log=lambda *_: None
  )
  swept = metrics_io.read_metrics(str(tmp_path / 'sweep' / 'seed=1'))
  single = metrics_io.read_metrics(str(tmp_path / 'alone'))
  assert [r['step'] for r in swept] == [r['step'] for r in single]
  for a, b in zip(swept, single):
    assert a['bytes_up'] == pytest.approx(b['bytes_up'])
    assert a['bytes_down'] == pytest.approx(b['bytes_down'])
  assert swept[0]['bytes_up'] == 0.0 and 0 < swept[-1]['bytes_up'] < swept[-1]['bytes_down']
  run = next(r for r in out['runs'] if r['seed'] == 1)
  assert run['bytes_up'] == pytest.approx(alone['bytes_up'])
