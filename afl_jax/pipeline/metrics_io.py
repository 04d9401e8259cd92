"""``metrics.jsonl`` (strict JSON, a flushed line per evaluation) and TensorBoard events;
docs/reliability.md, "Metrics"."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from afl_jax.errors import UserError
from afl_jax.pipeline.workdir import make_dirs, open_append, write_text

METRICS_FILE = 'metrics.jsonl'
TENSORBOARD_DIR = 'tensorboard'
NONFINITE_KEY = 'nonfinite'
_NONFINITE = {'nan': math.nan, 'inf': math.inf, '-inf': -math.inf}


class MetricsError(UserError):
  """A metrics file damaged before its last line."""


def warn(message: str) -> None:
  print(f'warning: {message}', file=sys.stderr, flush=True)


def _name(x: float) -> str:
  return 'nan' if math.isnan(x) else ('inf' if x > 0 else '-inf')


def _item(value: Any) -> Any:
  return value.item() if hasattr(value, 'item') and getattr(value, 'ndim', 0) == 0 else value


def encode_record(step: int, scalars: Mapping[str, Any]) -> str:
  """One strict-JSON line for ``{'step': step, **scalars}`` (non-finite floats as null, named
  under ``nonfinite``)."""
  record: dict[str, Any] = {'step': int(step)}
  bad: dict[str, str] = {}
  for name, value in scalars.items():
    if name in ('step', NONFINITE_KEY):
      raise ValueError(f'{name!r} is reserved in metrics records')
    value = _item(value)
    if isinstance(value, float) and not math.isfinite(value):
      bad[name], value = _name(value), None
    record[name] = value
  if bad:
    record[NONFINITE_KEY] = bad
  return json.dumps(record, sort_keys=True, allow_nan=False)


def evaluation_record(
  step: int,
  wall_clock: float,
  bits: tuple[float, float],
  evaluation: Mapping[str, float],
  rule_metrics: Mapping[str, Any] | None = None,
  **extra: Any,
) -> dict[str, Any]:
  """One evaluation's record: step, clock, bytes up and down, the chunk's mean rule metrics."""
  rule = {
    k.replace('/', '_'): float(np.mean(v))
    for k, v in (rule_metrics or {}).items()
    if k.startswith(('client/', 'server/'))
  }
  return {
    'step': int(step),
    'wall_clock': float(wall_clock),
    'bytes_up': float(bits[0] / 8),
    'bytes_down': float(bits[1] / 8),
    **extra,
    **rule,
    **evaluation,
  }


class MetricsWriter(contextlib.AbstractContextManager):
  """``<workdir>/metrics.jsonl`` and TensorBoard events; ``workdir=None`` writes nothing."""

  def __init__(
    self,
    workdir: str | os.PathLike | None,
    *,
    tensorboard: bool = False,
    resume_step: int | None = None,
    warn: Callable[[str], None] = warn,
  ):
    self.workdir = None if workdir is None else os.fspath(workdir)
    self._f = self._tb = None
    if self.workdir is None:
      return
    make_dirs(self.workdir)
    self.path = os.path.join(self.workdir, METRICS_FILE)
    if os.path.isfile(self.path):
      read_metrics(self.workdir, repair=True, warn=warn)  # a torn tail goes first
    self._f = open_append(self.path)
    if tensorboard:
      try:
        from tensorboardX import SummaryWriter
      except ImportError:
        warn('tensorboardX is not installed (pip install tensorboardX); writing metrics.jsonl only')
      else:
        purge = None if resume_step is None else resume_step + 1
        logdir = make_dirs(os.path.join(self.workdir, TENSORBOARD_DIR))
        self._tb = SummaryWriter(logdir=logdir, purge_step=purge, flush_secs=30)

  def write_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
    if self._f is None:
      return
    try:
      self._f.write(encode_record(step, scalars) + '\n')
      self._f.flush()
    except OSError as e:
      e.filename = e.filename or self.path  # a failed write names its file
      raise
    for name, value in scalars.items() if self._tb is not None else ():
      value = _item(value)
      if isinstance(value, int | float) and not isinstance(value, bool):
        self._tb.add_scalar(name, float(value), global_step=int(step))

  def write_record(self, record: Mapping[str, Any]) -> None:
    self.write_scalars(record['step'], {k: v for k, v in record.items() if k != 'step'})

  def write_hparams(self, hparams: Mapping[str, Any]) -> None:
    """The config as TensorBoard text (config.json holds it for every other reader)."""
    if self._tb is not None:
      text = json.dumps(hparams, sort_keys=True, indent=2, allow_nan=False)
      self._tb.add_text('config', f'```\n{text}\n```', global_step=0)

  def flush(self) -> None:
    if self._f is not None and not self._f.closed:
      self._f.flush()
      os.fsync(self._f.fileno())
    if self._tb is not None:
      self._tb.flush()

  def close(self) -> None:
    self.flush()
    if self._f is not None:
      self._f.close()
    if self._tb is not None:
      self._tb.close()
      self._tb = None

  def __exit__(self, *exc: Any) -> None:
    self.close()


def read_metrics(
  workdir: str | os.PathLike,
  *,
  repair: bool = False,
  warn: Callable[[str], None] = warn,
) -> list[dict[str, Any]]:
  """The records of ``<workdir>/metrics.jsonl`` ([] without it): a torn last line dropped with a
  warning (``repair``: rewritten without it), MetricsError for damage before it."""
  path = os.path.join(os.fspath(workdir), METRICS_FILE)
  if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
    raise MetricsError(f'{path} is not a regular file; move it away, or choose another --workdir')
  if not os.path.isfile(path):
    return []
  with open(path, 'rb') as f:
    raw = f.read()
  lines = [(i, line) for i, line in enumerate(raw.split(b'\n'), start=1) if line.strip()]
  records, torn = [], False
  for k, (number, line) in enumerate(lines):
    rec = _parse(line)
    if rec is None and k == len(lines) - 1 and not raw.endswith(b'\n'):
      torn = True
      break
    if rec is None:
      raise MetricsError(
        f'{path}: line {number} is not a JSON record: {line[:60]!r}; the file is damaged '
        'before its last line (not a crash artifact); fix or delete it'
      )
    records.append(rec)
  if torn:
    warn(f'{path}: dropped a torn last line left by an interrupted run')
  if repair and (torn or (raw and not raw.endswith(b'\n'))):
    write_text(path, ''.join(json.dumps(r, sort_keys=True) + '\n' for r in records))
  for r in records:
    bad = r.pop(NONFINITE_KEY, None)
    r |= {k: _NONFINITE.get(v, math.nan) for k, v in bad.items()} if isinstance(bad, dict) else {}
  return records


def _parse(line: bytes) -> dict | None:
  try:
    rec = json.loads(line)
  except (ValueError, UnicodeDecodeError):
    return None
  step = rec.get('step') if isinstance(rec, dict) else None
  ok = isinstance(step, int) and not isinstance(step, bool) and step >= 0
  return rec if ok else None


def truncate_metrics(workdir: str | os.PathLike, step: int) -> list[dict[str, Any]]:
  """Keep (and return) the records up to ``step``."""
  path = os.path.join(os.fspath(workdir), METRICS_FILE)
  records = read_metrics(workdir, repair=True)
  kept = [r for r in records if r['step'] <= step]
  if len(kept) != len(records):
    lines = (encode_record(r['step'], {k: v for k, v in r.items() if k != 'step'}) for r in kept)
    write_text(path, ''.join(line + '\n' for line in lines))
  return kept


def lower_is_better(metric: str) -> bool:
  """Is ``metric`` one a run drives down (a loss, a gradient norm, an optimality gap)?"""
  return metric.endswith(('loss', 'grad_norm', 'grad_norm2', 'gap'))


def first_reaching(
  records: Sequence[Mapping[str, Any]], target: float, key: str = 'test_accuracy'
) -> Mapping[str, Any] | None:
  """The first record whose finite ``key`` reaches ``target`` (``<=`` where
  :func:`lower_is_better`, else ``>=``); None: none does."""
  lower = lower_is_better(key)
  for r in records:
    v = r.get(key)
    if isinstance(v, int | float) and math.isfinite(v) and (v <= target if lower else v >= target):
      return r
  return None
