"""2 forced CPU devices give the 1-device iterates and client states (tests/helpers/two_devices.py),
also where the device count does not divide N (issue 15: padded slots are never messages), and
arrivals grouped by K on 2 devices give the padded run."""

from helper_runs import run_helper

EACH_N = ('asynfl', 'asynfl_arrivals', 'asynfl_per_job_full', 'asynflc_ef_sign', 'asynflc_ef_top_k')
CASES = [f'{c}_n8' for c in ('fedbuff', 'masfl', 'asynfl', 'asynflc_ef', 'fedbuff_buckets')]
CASES += ['fedbuff_cnn_n8', 'fedbuff_cnn_n5'] + [f'{c}_n{n}' for c in EACH_N for n in (3, 5)]


def test_two_devices_equal_one_device():
  diffs = run_helper('two_devices.py')
  assert set(diffs) == set(CASES) | {f'{c}_moved' for c in CASES}
  for case in CASES:
    assert diffs[f'{case}_moved'] > 1e-3, case  # the runs did move
    assert diffs[case] <= 1e-12, (case, diffs[case])  # float64: reduction order only
