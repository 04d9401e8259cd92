"""metrics.jsonl (strict JSON, torn-line repair, truncation) and TensorBoard event files."""

import glob
import json
import math
import os
import struct

import numpy as np
import pytest

from afl_jax.pipeline import metrics_io


def test_jsonl_round_trip_and_strict_nonfinite(tmp_path):
  with metrics_io.MetricsWriter(tmp_path) as w:
    w.write_scalars(0, {'test_accuracy': 0.1, 'test_loss': 2.3})
    w.write_scalars(
      10,
      {'test_loss': np.float32(np.nan), 'grad_norm': math.inf, 'x': -math.inf, 'n': np.int64(3)},
    )
    w.write_scalars(20, {'stopped': 'non-finite test_loss at server step 12', 'ok': True})
  text = (tmp_path / 'metrics.jsonl').read_text()
  assert 'NaN' not in text and 'Infinity' not in text
  lines = [json.loads(line) for line in text.splitlines()]  # strict JSON parses
  assert lines[1]['test_loss'] is None and lines[1]['grad_norm'] is None
  assert lines[1]['nonfinite'] == {'test_loss': 'nan', 'grad_norm': 'inf', 'x': '-inf'}
  assert 'nonfinite' not in lines[0]
  recs = metrics_io.read_metrics(tmp_path)
  assert [r['step'] for r in recs] == [0, 10, 20]
  assert math.isnan(recs[1]['test_loss']) and recs[1]['grad_norm'] == math.inf
  assert recs[1]['x'] == -math.inf and recs[1]['n'] == 3 and 'nonfinite' not in recs[1]
  assert recs[2]['stopped'].startswith('non-finite') and recs[2]['ok'] is True
  with metrics_io.MetricsWriter(tmp_path) as w, pytest.raises(ValueError, match='reserved'):
    w.write_scalars(0, {'nonfinite': 1.0})
  assert metrics_io.read_metrics(tmp_path / 'missing') == []


def _write(path, records, tail=''):
  with open(path, 'w') as f:
    for r in records:
      f.write(json.dumps(r) + '\n')
    f.write(tail)


def test_a_torn_last_line_is_dropped_and_rewritten_by_the_owner_damage_before_it_refused(tmp_path):
  path = tmp_path / 'metrics.jsonl'
  _write(path, [{'step': 0, 'a': 1.0}, {'step': 10, 'a': 2.0}], tail='{"step": 20, "a": 3.')
  warnings = []
  torn = path.read_bytes()
  recs = metrics_io.read_metrics(tmp_path, warn=warnings.append)  # a reader: no rewrite
  assert [r['step'] for r in recs] == [0, 10] and path.read_bytes() == torn
  assert len(warnings) == 1 and 'torn last line' in warnings[0] and str(path) in warnings[0]
  assert metrics_io.read_metrics(tmp_path, repair=True, warn=warnings.append) == recs
  assert path.read_text().endswith('{"a": 2.0, "step": 10}\n')
  assert metrics_io.read_metrics(tmp_path, warn=warnings.append) == recs
  assert len(warnings) == 2  # repaired: no further warning
  (tmp_path / 'w').mkdir()
  _write(tmp_path / 'w' / 'metrics.jsonl', [{'step': 0}], tail='{"ste')
  with metrics_io.MetricsWriter(tmp_path / 'w', warn=warnings.append) as w:
    w.write_scalars(10, {'a': 1.0})  # the writer repairs a torn tail before appending
  assert [r['step'] for r in metrics_io.read_metrics(tmp_path / 'w')] == [0, 10]
  assert len(warnings) == 3
  _write(path, [{'step': 0}], tail='{"step": 10}')  # a whole last record, no newline: kept
  recs = metrics_io.read_metrics(tmp_path, repair=True, warn=warnings.append)
  assert [r['step'] for r in recs] == [0, 10] and len(warnings) == 3
  assert path.read_text().endswith('{"step": 10}\n')
  _write(path, [{'step': 0}], tail='garbage\n{"step": 10}\n')  # damage before the last line
  with pytest.raises(metrics_io.MetricsError, match='line 2') as info:
    metrics_io.read_metrics(tmp_path)
  assert str(path) in str(info.value)
  assert path.read_text().startswith('{"step": 0}\ngarbage')  # nothing rewritten


def test_truncate_metrics_keeps_records_up_to_step(tmp_path):
  with metrics_io.MetricsWriter(tmp_path) as w:
    for step in (0, 10, 20, 30):
      w.write_scalars(step, {'loss': math.nan if step == 10 else float(step)})
  with open(tmp_path / 'metrics.jsonl', 'a') as f:
    f.write('{"step": 40, "lo')
  kept = metrics_io.truncate_metrics(tmp_path, 20)
  assert [r['step'] for r in kept] == [0, 10, 20] and math.isnan(kept[1]['loss'])
  text = (tmp_path / 'metrics.jsonl').read_text()
  assert 'NaN' not in text and text.count('\n') == 3
  assert metrics_io.truncate_metrics(tmp_path / 'missing', 5) == []


def read_events(logdir):
  """The Event protos of a TensorBoard logdir (TFRecords: length, crc, data, crc)."""
  from tensorboardX.proto import event_pb2

  events = []
  for path in sorted(glob.glob(os.path.join(logdir, 'events.out.tfevents.*'))):
    raw, pos = open(path, 'rb').read(), 0
    while pos < len(raw):
      (length,) = struct.unpack('<Q', raw[pos : pos + 8])
      events.append(event_pb2.Event.FromString(raw[pos + 12 : pos + 12 + length]))
      pos += 16 + length
  return events


def test_one_writer_holds_the_scalars_in_jsonl_and_tensorboard(tmp_path):
  logdir = tmp_path / 'tensorboard'
  w = metrics_io.MetricsWriter(tmp_path, tensorboard=True)
  w.write_hparams({'lr': 0.1})
  w.write_scalars(0, {'test_accuracy': 0.25, 'stopped': 'x'})
  w.write_scalars(10, {'test_accuracy': 0.5, 'test_loss': np.float32(1.5)})
  w.close()
  w.close()  # a second close does nothing
  got = {}
  for ev in read_events(logdir):
    for v in ev.summary.value:
      if v.HasField('simple_value'):
        got.setdefault(v.tag, []).append((ev.step, v.simple_value))
  texts = [v.tag for ev in read_events(logdir) for v in ev.summary.value if 'config' in v.tag]
  assert texts and not (tmp_path / 'hparams.json').exists()  # the config: TensorBoard text only
  assert got['test_accuracy'] == [(0, 0.25), (10, 0.5)]
  assert got['test_loss'] == [(10, 1.5)]
  assert 'stopped' not in got
  assert [r['step'] for r in metrics_io.read_metrics(tmp_path)] == [0, 10]
  with metrics_io.MetricsWriter(tmp_path / 'r', tensorboard=True, resume_step=20) as w:
    w.write_scalars(30, {'a': 1.0})  # a resume writes TensorBoard's purge marker
  events = read_events(tmp_path / 'r' / 'tensorboard')
  assert [ev.step for ev in events if ev.session_log.status == ev.session_log.START] == [21]


def test_without_tensorboardx_one_warning_and_jsonl_only(tmp_path, monkeypatch):
  import sys

  monkeypatch.setitem(sys.modules, 'tensorboardX', None)  # import fails
  warnings = []
  w = metrics_io.MetricsWriter(tmp_path, tensorboard=True, warn=warnings.append)
  w.write_scalars(0, {'a': 1.0})
  w.close()
  assert len(warnings) == 1 and 'pip install tensorboardX' in warnings[0]
  assert metrics_io.read_metrics(tmp_path) == [{'step': 0, 'a': 1.0}]
  assert not (tmp_path / 'tensorboard').exists()


def test_a_target_is_reached_in_its_metrics_direction():
  recs = [
    {'step': 0, 'test_accuracy': 0.1, 'test_loss': 2.0},
    {'step': 10, 'test_accuracy': float('nan'), 'test_loss': float('nan')},
    {'step': 20, 'test_accuracy': 0.6, 'test_loss': 0.8},
  ]
  assert metrics_io.first_reaching(recs, 0.5)['step'] == 20  # accuracy: >=
  assert metrics_io.first_reaching(recs, 0.9, 'test_loss')['step'] == 20  # loss: <=
  assert metrics_io.first_reaching(recs, 0.5, 'test_loss') is None
  assert metrics_io.lower_is_better('grad_norm') and not metrics_io.lower_is_better('val_accuracy')
