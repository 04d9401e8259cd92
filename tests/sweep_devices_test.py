"""A seed sweep on however many devices the suite runs with (CI: 1 and 2): an odd number
of replicas (padded to the device count) whose Dirichlet splits give every seed other
client example counts; each replica equals its seed run alone."""

import jax
import numpy as np
import pytest

from afl_jax.pipeline import loop, sweep
from afl_jax.pipeline.build import build_data
from tests.sweep_pipeline_test import _config


def test_odd_seed_sweep_with_per_seed_client_sizes(tmp_path):
  c = _config()
  c.sweep.hparams.client_lr = [0.1]
  out = sweep.train_sweep(c, str(tmp_path), log=lambda *_: None)
  assert len(out['runs']) == 3 and len(out['groups']) == 1
  assert out['groups'][0]['mode'] == ('replicas' if jax.device_count() > 1 else 'clients')
  sizes = [
    build_data(sweep.point_config(c, {'hparams.client_lr': 0.1, 'seed': s})).sizes
    for s in (0, 1, 2)
  ]
  assert not np.array_equal(sizes[0], sizes[1])  # the replicas' counts differ
  for s in (0, 2):
    alone = loop.train_and_evaluate(
      sweep.point_config(c, {'hparams.client_lr': 0.1, 'seed': s}),
      str(tmp_path / f'alone{s}'),
      log=lambda *_: None,
    )
    run = next(r for r in out['runs'] if r['name'] == f'client_lr=0.1,seed={s}')
    # Another program (vmap width, device split): equal up to float32 reassociation, a
    # few ulps per step over 8 steps for the loss; at most one of the 359 digits test
    # predictions may flip with it.
    assert run['test_loss'] == pytest.approx(alone['test_loss'], rel=1e-4)
    assert run['test_accuracy'] == pytest.approx(alone['test_accuracy'], abs=1.01 / 359)
