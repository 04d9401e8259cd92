"""The client axis sharded over 4 forced CPU devices gives the 1-device iterates."""

import json
import os
import subprocess
import sys

import pytest


def test_sharded_run_matches_single_device():
  script = os.path.join(os.path.dirname(__file__), 'helpers', 'sharded_vs_single.py')
  env = dict(os.environ)
  env.pop('XLA_FLAGS', None)
  proc = subprocess.run(
    [sys.executable, script], capture_output=True, text=True, env=env, timeout=600
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  diffs = json.loads(proc.stdout.strip().splitlines()[-1])
  assert {'fedbuff', 'asynfl', 'asynflc_ef'} <= set(diffs)
  for name, value in diffs.items():
    if name.endswith('_moved'):
      assert value > 1e-3, (name, value)  # the runs did move away from zero
    else:
      assert value == pytest.approx(0.0, abs=1e-5), (name, value)
