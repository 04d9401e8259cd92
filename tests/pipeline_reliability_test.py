"""Reliability through scripts/train.py, where a user meets it (issue 13, item 4).

Each case runs the script in a subprocess on a tiny digits config and asserts the
exit status and the one ``error:`` / ``warning:`` line: a resume with another
config is refused and leaves config.json alone; a damaged latest checkpoint falls
back to the previous one and the run ends with the same metrics as an
uninterrupted run; a torn metrics.jsonl is repaired; a corrupt schedule file is
named; absurd sizes are refused with the estimate, before any allocation.
"""

import json
import os
import shutil

import pytest
from helper_runs import one_error_line, run_train
from pipeline_checkpoint_test import bit_flip, largest_file, truncate

from afl_jax.pipeline import checkpoint, metrics_io

pytestmark = pytest.mark.slow

SMOKE = [
  '--config=configs/digits_smoke.py',
  '--config.num_clients=10',
  '--config.num_rounds=12',
  '--config.eval_every=4',
  '--config.checkpoint_every=4',
]


def train(workdir, *extra, timeout=300):
  return run_train(workdir, *SMOKE, *extra, timeout=timeout)


def lines_starting(output, prefix):
  return [line for line in output.splitlines() if line.startswith(prefix)]


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """An uninterrupted run: its workdir and metrics."""
  workdir = tmp_path_factory.mktemp('reference')
  rc, out = train(workdir)
  assert rc == 0, out
  return workdir, metrics_io.read_metrics(workdir)


@pytest.fixture(scope='module')
def interrupted(tmp_path_factory):
  """A run stopped after 8 of 12 steps (checkpoints at 4 and 8)."""
  workdir = tmp_path_factory.mktemp('interrupted')
  rc, out = train(workdir, '--config.stop_after_steps=8')
  assert rc == 0, out
  assert checkpoint.Checkpointer(workdir).steps() == [4, 8]
  return workdir


def copy_of(src, tmp_path):
  dst = tmp_path / 'run'
  shutil.copytree(src, dst)
  return dst


# ---- (a) resume with another config --------------------------------------------------


def test_resume_with_a_different_config_is_refused(reference, tmp_path):
  workdir = copy_of(reference[0], tmp_path)
  before = (workdir / 'config.json').read_bytes()
  metrics_before = (workdir / 'metrics.jsonl').read_bytes()
  rc, out = train(
    workdir, '--config.hparams.client_lr=0.05', '--config.seed=3', '--config.dtype=float64'
  )
  one_error_line(
    rc,
    out,
    'hparams.client_lr 0.1 -> 0.05',
    'seed 0 -> 3',
    'dtype "float32" -> "float64"',
    '--noresume',
  )
  assert (workdir / 'config.json').read_bytes() == before
  assert (workdir / 'metrics.jsonl').read_bytes() == metrics_before


# ---- (b) damaged latest checkpoint ---------------------------------------------------------


DAMAGE = {
  'truncate': lambda d: truncate(largest_file(d)),
  'bit_flip': lambda d: bit_flip(largest_file(d), bit=0x01),
  'delete_file': lambda d: os.remove(largest_file(d)),
}


def assert_same_metrics(got, want):
  assert [r['step'] for r in got] == [r['step'] for r in want]
  for g, w in zip(got, want):
    assert g == w, (g, w)


@pytest.mark.parametrize('damage', sorted(DAMAGE))
def test_damaged_latest_checkpoint_falls_back_and_ends_equal(
  reference, interrupted, tmp_path, damage
):
  workdir = copy_of(interrupted, tmp_path)
  DAMAGE[damage](str(workdir / 'checkpoints' / '8'))
  rc, out = train(workdir)
  assert rc == 0, out
  warnings = lines_starting(out, 'warning:')
  assert len(warnings) == 1 and 'step 8' in warnings[0] and 'damaged' in warnings[0], out
  assert 'resumed from checkpoint at server step 4' in out
  assert_same_metrics(metrics_io.read_metrics(workdir), reference[1])
  assert (workdir / 'damaged_checkpoints' / '8').is_dir()


# ---- (c) torn metrics ---------------------------------------------------------------------


def test_torn_metrics_file_is_repaired_and_run_ends_equal(reference, interrupted, tmp_path):
  workdir = copy_of(interrupted, tmp_path)
  with open(workdir / 'metrics.jsonl', 'a') as f:
    f.write('{"step": 12, "test_accu')  # the crash cut the next record mid-line
  rc, out = train(workdir)
  assert rc == 0, out
  assert 'resumed from checkpoint at server step 8' in out
  warnings = lines_starting(out, 'warning:')
  assert len(warnings) == 1 and 'torn last line' in warnings[0], out
  text = (workdir / 'metrics.jsonl').read_text()
  assert all(json.loads(line) for line in text.splitlines())  # strict JSON throughout
  assert_same_metrics(metrics_io.read_metrics(workdir), reference[1])


# ---- (d) corrupt schedule file ----------------------------------------------------------------


def test_corrupt_saved_schedule_is_named_when_extending(interrupted, tmp_path):
  # Extending num_rounds compares the new schedule's past with the saved schedule.npz.
  workdir = copy_of(interrupted, tmp_path)
  path = workdir / 'checkpoints' / 'schedule.npz'
  path.write_bytes(path.read_bytes()[:100])
  rc, out = train(workdir, '--config.num_rounds=16')
  one_error_line(rc, out, str(path), '--noresume')


# ---- (e) absurd sizes -----------------------------------------------------------------------


@pytest.mark.parametrize(
  'flags, fragment',
  [
    (['--config.num_rounds=2000000000'], 'config.num_rounds=2000000000 is invalid'),
    (
      ['--config.schedule.kind=waiting_windows', '--config.num_clients=100000000'],
      'config.num_clients=100000000 is invalid',
    ),
  ],
)
def test_absurd_sizes_are_refused_with_the_estimate(tmp_path, flags, fragment):
  rc, out = train(tmp_path / 'run', *flags, timeout=120)
  line = one_error_line(rc, out, fragment, 'slots', 'limit')
  assert 'GiB' in line
  assert not (tmp_path / 'run' / 'checkpoints').exists()
