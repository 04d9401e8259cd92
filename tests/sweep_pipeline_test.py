"""config.sweep end to end: a grid from one config, grouped into one compile, with the
files the reproduction protocol reads; a grid point equals the same config run alone."""

import json
import os

import ml_collections
import pandas as pd
import pytest

from afl_jax.core import simulator
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import loop, metrics_io, sweep
from afl_jax.reproduction import runs, scoring


def tiny_config(**fields):
  """FedBuff on 12 digits clients with logistic regression, 8 server steps."""
  c = config_lib.default()
  c.dataset, c.model, c.num_clients, c.train_subset = 'digits', 'logreg', 12, 0
  c.schedule.concurrency, c.schedule.buffer_size = 6, 3
  c.local_steps, c.batch_size = 2, 8
  c.hparams = {'client_lr': 0.1, 'server_lr': 1.0}
  c.num_rounds, c.eval_every, c.eval_train_samples = 8, 4, 100
  for k, v in fields.items():
    setattr(c, k, v)
  return c


def _config():
  c = tiny_config()
  c.validation_size = 100
  c.sweep = ml_collections.ConfigDict({'hparams': {'client_lr': [0.05, 0.1]}, 'seed': [0, 1, 2]})
  return c


def test_grid_order_and_one_rule_deciding_what_is_traced_for_sweeps_and_the_api():
  c = _config()
  grid = sweep.grid(c)
  assert len(grid) == 6 and grid[:2] == [{'hparams.client_lr': 0.05, 'seed': s} for s in (0, 1)]
  assert sweep.traced_fields(c) == ['hparams.client_lr']
  # Float rates are traced; Top-k's fraction sets a shape and stays static, in a config
  # sweep and in the API's per-replica hyperparameters alike.
  c.algorithm = 'asynflc_ef'
  swept = {'client_lr': [0.05, 0.1], 'fraction': [0.1, 0.3]}
  c.sweep = ml_collections.ConfigDict({'hparams': swept})
  assert sweep.traced_fields(c) == ['hparams.client_lr']
  static, traced = simulator.split_hparams({'client_lr': 0.1, 'fraction': 0.01}, swept, 2)
  assert static == {'fraction': [0.1, 0.3]} and list(traced) == ['client_lr']


def test_train_sweep_one_compile_and_equals_single_run(tmp_path):
  c = _config()
  c.compressor.kind = 'top_k'  # bytes up (compressed) differ from the dense download
  out = sweep.train_sweep(c, str(tmp_path), log=lambda *_: None)
  assert len(out['runs']) == 6 and len(out['groups']) == 1  # lr traced, seeds stacked
  for name in ('summary.json', 'summary.md', 'plot.png'):
    assert os.path.exists(tmp_path / name), name
  point, name = {'hparams.client_lr': 0.1, 'seed': 1}, 'client_lr=0.1,seed=1'
  alone = loop.train_and_evaluate(
    sweep.point_config(c, point), str(tmp_path / 'alone'), log=lambda *_: None
  )
  ident = lambda d: json.loads((d / 'config.json').read_text())['identity']['digest']
  assert ident(tmp_path / name) == ident(tmp_path / 'alone')  # the same run
  one = next(r for r in out['runs'] if r['name'] == name)
  assert one['test_accuracy'] == pytest.approx(alone['test_accuracy'], abs=1e-6)
  assert one['val_accuracy'] == pytest.approx(alone['val_accuracy'], abs=1e-6)
  swept, single = (metrics_io.read_metrics(str(tmp_path / d)) for d in (name, 'alone'))
  assert [r['step'] for r in swept] == [r['step'] for r in single] == [0, 4, 8]
  for a, b in zip(swept, single):  # float32, another program (a vmap over replicas)
    assert (a['bytes_up'], a['bytes_down']) == (b['bytes_up'], b['bytes_down'])
    assert a['test_loss'] == pytest.approx(b['test_loss'], rel=1e-5)
  assert 0 < swept[-1]['bytes_up'] < swept[-1]['bytes_down']
  # The reproduction protocol reads the sweep's curves as records: every run, every
  # evaluation, and selects on validation over the seeds.
  found, steps = runs.records_of_sweep('e', 'fedbuff', 'select', str(tmp_path), out)
  rows = pd.DataFrame(found)
  assert rows.groupby('setting').seed.nunique().tolist() == [3, 3] and steps == 8
  sel = scoring.select(scoring.per_run(rows), 'e', 'fedbuff')
  assert len(sel['scores']) == 2
