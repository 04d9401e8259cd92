"""A sweep's run folders hold the schedule each run used, and a recorded schedule replays.

Each ``<run>/schedule.npz`` of a sweep equals, array for array and bit for bit, the
schedule built for that grid point's config alone; named as a ``trace`` in a config,
a run folder's ``schedule.npz`` gives the same metrics as the run that wrote it.
"""

import zipfile

import ml_collections
import numpy as np
import pytest
from sweep_pipeline_test import tiny_config

from afl_jax import schedules
from afl_jax.errors import ConfigError
from afl_jax.pipeline import build as build_lib
from afl_jax.pipeline import loop, metrics_io, sweep

ARRAYS = ('client_ids', 'start_step', 'local_steps', 'mask', 'wall_clock')
QUIET = {'log': lambda *_: None}


def _arrays(path):
  with np.load(path, allow_pickle=False) as f:
    return {k: f[k] for k in f.files}


def test_each_sweep_run_keeps_its_own_schedule_bit_for_bit(tmp_path):
  c = tiny_config()
  c.sweep = ml_collections.ConfigDict({'seed': [0, 1]})  # schedule.seed=-1: the seed's
  out = sweep.train_sweep(c, str(tmp_path), **QUIET)
  assert len(out['groups']) == 1  # both runs are replicas of one program
  files = {}
  for point in sweep.grid(c):
    name = sweep.run_name(point)
    path = tmp_path / name / 'schedule.npz'
    with zipfile.ZipFile(path) as z:  # plain arrays only: nothing to unpickle
      assert all(n.endswith('.npy') for n in z.namelist())
    got = _arrays(path)
    alone = build_lib.build_run(sweep.point_config(c, point)).schedule
    for k in ARRAYS:
      want = getattr(alone, k)
      assert got[k].dtype == want.dtype and got[k].shape == want.shape, (name, k)
      assert got[k].tobytes() == want.tobytes(), (name, k)
    assert int(got['num_clients']) == alone.num_clients == c.num_clients
    back = schedules.load(path)  # the library's reader gives the same Schedule
    assert all(np.array_equal(getattr(back, k), getattr(alone, k)) for k in ARRAYS)
    files[name] = got
  a, b = files.values()
  assert not np.array_equal(a['client_ids'], b['client_ids'])  # the seeds differ: so do they


def test_a_recorded_schedule_replays_to_the_same_metrics(tmp_path):
  c = tiny_config()
  c.schedule.seed = 5
  loop.train_and_evaluate(c, str(tmp_path / 'original'), **QUIET)
  recorded = str(tmp_path / 'original' / 'schedule.npz')
  replay = tiny_config()
  replay.schedule.kind, replay.schedule.trace = 'trace', recorded
  loop.train_and_evaluate(replay, str(tmp_path / 'replay'), **QUIET)
  original, again = (metrics_io.read_metrics(tmp_path / d) for d in ('original', 'replay'))
  assert len(original) == 3 and original == again  # every metric, bit for bit
  np.testing.assert_array_equal(
    _arrays(tmp_path / 'replay' / 'schedule.npz')['client_ids'], _arrays(recorded)['client_ids']
  )
  # Fewer rounds replay the start of the recording.
  replay.num_rounds = 4
  short = build_lib.build_run(replay).schedule
  assert short.num_steps == 4
  np.testing.assert_array_equal(short.start_step, _arrays(recorded)['start_step'][:4])


@pytest.mark.parametrize(
  ('field', 'value', 'message'),
  [
    ('num_clients', 10, r'config\.schedule\.trace=.*records a schedule of 12 clients'),
    ('num_rounds', 9, r'config\.schedule\.trace=.*records 8 server steps, fewer than num_rounds=9'),
    ('buffer_size', 2, r'config\.schedule\.buffer_size=2 .*must be 3, the arrival slots'),
    ('local_steps', 3, r'config\.schedule\.trace=.*ran K=2 local steps, not a multiple of '
     'its K_i=3'),
  ],
)  # fmt: skip
def test_a_recorded_schedule_that_does_not_fit_the_config_is_one_line(
  tmp_path, field, value, message
):
  c = tiny_config()
  path = str(tmp_path / 'schedule.npz')
  build_lib.build_run(c).schedule.save(path)
  replay = tiny_config()
  replay.schedule.kind, replay.schedule.trace = 'trace', path
  if field == 'buffer_size':
    replay.schedule.buffer_size = value
  else:
    replay[field] = value
  with pytest.raises(ConfigError, match=message):
    build_lib.build_run(replay)
