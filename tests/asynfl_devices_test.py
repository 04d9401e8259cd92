"""AsynFL on 2 devices equals 1 device for client counts the device count does not divide.

Issue 15 item 1: the engine pads the arrival axis to a multiple of the device count
(N=3 -> 4 slots, N=5 -> 6); AsynFL's server used to count the padded slots as
messages and refused every such run. Runs tests/helpers/asynfl_two_devices.py in a
subprocess with 2 forced CPU devices (continuous and per-job training, both
normalizers, Sign and Top-k with error feedback: the reporting clients' messages
compressed on 2 devices).
"""

import pytest
from helper_runs import run_helper


def test_asynfl_two_devices_equal_one_device_for_n_3_and_5():
  diffs = run_helper('asynfl_two_devices.py')
  cases = ['asynfl', 'asynfl_arrivals', 'asynfl_per_job_full', 'asynflc_ef_sign']
  cases += ['asynflc_ef_top_k']
  assert {f'{c}_n{n}' for c in cases for n in (3, 5)} <= set(diffs)
  for name, value in diffs.items():
    if name.endswith('_moved'):
      assert value > 0.1, (name, value)  # the runs did move
    else:
      assert value == pytest.approx(0.0, abs=1e-12), (name, value)
