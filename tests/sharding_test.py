"""The client axis sharded over 4 forced CPU devices gives the 1-device iterates."""

import pytest
from helper_runs import run_helper


def test_sharded_run_matches_single_device():
  diffs = run_helper('sharded_vs_single.py')
  assert {'fedbuff', 'asynfl', 'asynflc_ef'} <= set(diffs)
  for name, value in diffs.items():
    if name.endswith('_moved'):
      assert value > 1e-3, (name, value)  # the runs did move away from zero
    else:
      assert value == pytest.approx(0.0, abs=1e-5), (name, value)
