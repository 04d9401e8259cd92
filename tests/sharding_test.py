"""2 forced CPU devices give the 1-device iterates and client states (tests/helpers/two_devices.py):
N = 8 sharded (FedBuff, MasFL, AsynFL, AsynFLC-EF; FedBuff with a convolving model, its clients
one at a time on each device, also with N = 5), and AsynFL's variants with N = 3 and 5,
which the device count does not divide (issue 15: padded slots are never messages)."""

from helper_runs import run_helper

CASES = [
  'fedbuff_n8',
  'masfl_n8',
  'asynfl_n8',
  'asynflc_ef_n8',
  'fedbuff_cnn_n8',
  'fedbuff_cnn_n5',
] + [
  f'{c}_n{n}'
  for c in (
    'asynfl',
    'asynfl_arrivals',
    'asynfl_per_job_full',
    'asynflc_ef_sign',
    'asynflc_ef_top_k',
  )
  for n in (3, 5)
]


def test_two_devices_equal_one_device():
  diffs = run_helper('two_devices.py')
  assert set(diffs) == set(CASES) | {f'{c}_moved' for c in CASES}
  for case in CASES:
    assert diffs[f'{case}_moved'] > 1e-3, case  # the runs did move
    assert diffs[case] <= 1e-12, (case, diffs[case])  # float64: reduction order only
