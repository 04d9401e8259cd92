"""The ``trace`` schedule kind: recorded jobs and per-client speeds from csv/npz files, worked
out by hand; a run on a trace resumed equals an uninterrupted one."""

import json
import os

import numpy as np
import pytest
from experiment_test import tiny

from afl_jax import schedules
from afl_jax.errors import ConfigError
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import loop
from afl_jax.pipeline.build import build_schedule
from afl_jax.schedules import traces

# Six recorded jobs (client, start, finish), in no particular order. By finish time:
# A(c0, 0-3), C(c2, 1-4), B(c1, 0-5), E(c3, 4-6), D(c0, 3-7), F(c1, 5-9). With two
# arrivals per step: step 0 = [A, C] at t=4, step 1 = [B, E] at t=6, step 2 = [D, F] at
# t=9. Start versions (steps applied at a time <= the start): A, C, B, D: 0 (D starts at
# 3 < 4); E starts at 4, the moment step 0 is applied: 1; F starts at 5: 1.
JOBS = 'client,start,finish\n1,0,5\n0,3,7\n2,1,4\n1,5,9\n0,0,3\n3,4,6\n'
IDS = [[0, 2], [1, 3], [0, 1]]
START = [[0, 0], [0, 1], [0, 1]]
WALL = [4.0, 6.0, 9.0]
K = np.array([1, 2, 3, 4])  # each client's local steps


def trace_config(path, num_rounds=3, **fields):
  c = config_lib.default()
  c.num_clients, c.num_rounds = 4, num_rounds
  c.schedule.update({'kind': 'trace', 'trace': str(path), 'buffer_size': 2, **fields})
  return c


def build(c, local_steps=K):
  c = config_lib.resolve(c)
  config_lib.validate_components(c)
  return build_schedule(c, local_steps)


@pytest.mark.parametrize('fmt', ['csv', 'npz'])
def test_recorded_jobs_become_the_hand_computed_arrays(tmp_path, fmt):
  path = tmp_path / f'jobs.{fmt}'
  if fmt == 'csv':
    path.write_text(JOBS)
  else:
    rows = np.array([r.split(',') for r in JOBS.split()[1:]], float)
    np.savez(path, client=rows[:, 0].astype(int), start=rows[:, 1], finish=rows[:, 2])
  s = build(trace_config(path))
  want = schedules.from_arrays(IDS, START, K[np.array(IDS)], wall_clock=WALL, num_clients=4)
  assert s.digest() == want.digest()
  np.testing.assert_array_equal(s.staleness, [[0, 0], [1, 0], [2, 1]])
  short = build(trace_config(path, num_rounds=2))  # fewer steps take the start of the trace
  np.testing.assert_array_equal(short.client_ids, IDS[:2])


def test_per_client_speeds_run_on_the_event_clock(tmp_path):
  # Three clients, all training (concurrency 3, one arrival per step), durations exactly
  # 1, 2.5 and 4 s: each client runs back to back. Arrivals: c0 at 1, 2; c1 at 2.5 (from
  # version 0); c0 at 3; at t=4 c2 (its first job, version 0) then c0 (started at 3 from
  # version 4). Ties go to the job started first.
  path = tmp_path / 'speeds.csv'
  path.write_text('client,duration\n2,4\n0,1\n1,2.5\n')
  c = trace_config(path, concurrency=3, buffer_size=1, durations='constant')
  c.num_clients, c.num_rounds = 3, 6
  c.schedule.durations_params = {'value': 1.0}
  s = build(c, np.ones(3, int))
  np.testing.assert_array_equal(s.client_ids[:, 0], [0, 0, 1, 0, 2, 0])
  np.testing.assert_array_equal(s.start_step[:, 0], [0, 1, 0, 2, 0, 4])
  np.testing.assert_array_equal(s.wall_clock, [1, 2, 2.5, 3, 4, 4])


BAD_FIELDS = {'concurrency': {'concurrency': 20}, 'client_speed': {'client_speed': 'lognormal'}}
BAD_FIELDS['buffer_size'] = {'buffer_size': 0}


@pytest.mark.parametrize(
  'text,field,fragment',
  [
    (None, 'trace', 'no such file'),
    ('a,b\n1,2\n', 'trace', "has columns ['a', 'b']"),
    ('client,start,finish\n0,0,1\n1,0\n', 'trace', 'every row must have the 3 columns'),
    ('client,start,finish\n0,0,1\n1,0,x\n', 'trace', 'cannot read it'),
    ('client,start,finish\n0,0,1\n1,0,2\n', 'trace', 'fewer than num_rounds=3 (needs 6 jobs)'),
    ('client,start,finish\n0,0,1\n7,0,2\n', 'trace', 'row 1: client 7 is not an id in [0, 4)'),
    ('client,start,finish\n0,2,1\n', 'trace', 'row 0: the job finishes at 1, before its start 2'),
    (JOBS.replace('2,1,4', '0,1,4'), 'trace', 'rows 2 and 4: client 0 runs two jobs at once'),
    ('client,start,start,finish\n0,0,0,1\n', 'trace', "column 'start' appears twice"),
    ('duration\n1\n2\n', 'trace', 'holds 2 per-client durations for num_clients=4'),
    ('duration\n1\n2\n0\n1\n', 'trace', 'client 2 has a duration <= 0'),
    ('duration\n1\n1\n1\n1\n', 'concurrency', 'must be an integer in [1, 4]'),
    (JOBS, 'client_speed', 'with a trace of recorded jobs'),
    (JOBS, 'buffer_size', 'must be an integer >= 1'),
  ],
)
def test_bad_traces_are_one_error_naming_the_field(tmp_path, text, field, fragment):
  path = tmp_path / 'trace.csv'
  if text is not None:
    path.write_text(text)
  with pytest.raises(ConfigError) as e:
    build(trace_config(path, **({'concurrency': 4} | BAD_FIELDS.get(field, {}))))
  assert e.value.field == f'schedule.{field}'
  assert str(e.value).startswith(f'config.schedule.{field}=') and '\n' not in str(e.value)
  assert fragment in str(e.value), str(e.value)


def test_size_is_checked_before_reading(tmp_path, monkeypatch):
  path = tmp_path / 'jobs.csv'
  path.write_text(JOBS)
  monkeypatch.setattr(traces, 'MAX_BYTES', 10)
  monkeypatch.setattr(np, 'asarray', None)  # nothing may be parsed
  with pytest.raises(ConfigError, match=r'holds \d+ bytes, more than 10'):
    traces.read(str(path))


def test_run_from_config_on_a_trace_resumes_bitwise(tmp_path):
  # Job j: client j mod 12, from 0.5 j to 0.5 j + 3 s (two clients per step, staleness > 0).
  trace, j = tmp_path / 'jobs.npz', np.arange(60)
  np.savez(trace, client=j % 12, start=0.5 * j, finish=0.5 * j + 3.0)

  def cfg(**kw):
    c = tiny(checkpoint_every=10, **kw)
    c.schedule.kind, c.schedule.trace = 'trace', str(trace)
    return c

  quiet = dict(log=lambda *_: None)
  loop.train_and_evaluate(cfg(), str(tmp_path / 'whole'), **quiet)
  first = loop.train_and_evaluate(cfg(stop_after_steps=20), str(tmp_path / 'parts'), **quiet)
  assert first['status'] == 'stopped at step 20' and first['steps'] == 20
  loop.train_and_evaluate(cfg(), str(tmp_path / 'parts'), **quiet)
  read = lambda d: [json.loads(x) for x in open(os.path.join(d, 'metrics.jsonl'))]
  whole, parts = read(tmp_path / 'whole'), read(tmp_path / 'parts')
  assert [r['step'] for r in parts] == [0, 10, 20, 30]
  assert whole == parts
  assert whole[-1]['wall_clock'] == 0.5 * 59 + 3.0  # the 60th job's finish
  saved = schedules.load(tmp_path / 'whole' / 'schedule.npz')
  assert saved.max_staleness > 0
