"""Metrics on disk: ``metrics.jsonl`` (strict JSON) and TensorBoard event files.

One writer, :class:`MetricsWriter`, with the interface of CLU's ``metric_writers``
(``write_scalars(step, scalars)``, ``write_hparams(hparams)``, ``flush()``,
``close()``):

* it appends one JSON object per line to ``workdir/metrics.jsonl``
  and flushes it to the OS at every write, so a crash loses at most the line being
  written. The JSON is strict (``allow_nan=False``): a non-finite float is written
  as ``null`` and named in the record's ``"nonfinite"`` flag, e.g.
  ``{"step": 40, "test_loss": null, "nonfinite": {"test_loss": "nan"}}``.
  :func:`read_metrics` turns them back into floats.
* with ``tensorboard=True`` it also writes event files with tensorboardX (a ~90 kB pure
  Python wheel; its dependencies numpy, protobuf and packaging are already needed
  by jax, orbax and matplotlib), not CLU's writer, which needs TensorFlow.
  ``tensorboard --logdir runs/`` then compares runs. On resume from step S it is
  opened with ``purge_step=S + 1`` so TensorBoard drops the events the interrupted
  run wrote after its checkpoint.

:func:`read_metrics` reads a file whose last line was cut by a crash (drops the torn
tail with a one-line warning; ``repair=True`` also rewrites the file, which the
writer and :func:`truncate_metrics` do on resume); a damaged line *before* the last
one is not a crash artifact and raises :class:`MetricsError`.
:func:`truncate_metrics` keeps the records up to a step (resume after a kill).
:func:`first_reaching` is the time-to-target rule of single runs and sweeps.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from afl_jax.errors import UserError
from afl_jax.pipeline.workdir import make_dirs, open_append, write_text

__all__ = [
  'MetricsError',
  'MetricsWriter',
  'decode_record',
  'encode_record',
  'final_summary',
  'first_reaching',
  'jsonable',
  'read_metrics',
  'truncate_metrics',
]

METRICS_FILE = 'metrics.jsonl'
HPARAMS_FILE = 'hparams.json'
TENSORBOARD_DIR = 'tensorboard'
NONFINITE_KEY = 'nonfinite'
_NONFINITE_NAMES = {'nan': math.nan, 'inf': math.inf, '-inf': -math.inf}


class MetricsError(UserError):
  """A metrics file that cannot be read (damaged before its last line)."""


def _warn(message: str) -> None:
  print(f'warning: {message}', file=sys.stderr, flush=True)


def _nonfinite_name(x: float) -> str:
  return 'nan' if math.isnan(x) else ('inf' if x > 0 else '-inf')


def encode_record(step: int, scalars: Mapping[str, Any]) -> str:
  """One strict-JSON line (no newline) for ``{'step': step, **scalars}``.

  Floats that are NaN or infinite become ``null`` and are listed under
  ``"nonfinite"`` (name -> 'nan' | 'inf' | '-inf'). Non-float values (ints, bools,
  strings such as a stop reason) are written as they are.
  """
  record: dict[str, Any] = {'step': int(step)}
  bad: dict[str, str] = {}
  for name, value in scalars.items():
    if name in ('step', NONFINITE_KEY):
      raise ValueError(f'{name!r} is reserved in metrics records')
    if hasattr(value, 'item') and getattr(value, 'ndim', 0) == 0:
      value = value.item()  # NumPy / JAX scalars
    if isinstance(value, float) and not math.isfinite(value):
      bad[name] = _nonfinite_name(value)
      value = None
    record[name] = value
  if bad:
    record[NONFINITE_KEY] = bad
  return json.dumps(record, sort_keys=True, allow_nan=False)


def decode_record(record: dict[str, Any]) -> dict[str, Any]:
  """Undo :func:`encode_record`'s null encoding (in place; returns the record)."""
  bad = record.pop(NONFINITE_KEY, None)
  if isinstance(bad, Mapping):
    for name, kind in bad.items():
      record[name] = _NONFINITE_NAMES.get(kind, math.nan)
  elif isinstance(bad, list):  # a plain list of names
    for name in bad:
      record[name] = math.nan
  return record


def jsonable(x: Any) -> Any:
  """``x`` as strict JSON values: NumPy scalars as Python ones, a non-finite float as its name
  ('nan', 'inf', '-inf'), a callable by its qualified name (repr() would hold a memory
  address, different in every process), anything else by its repr."""
  if isinstance(x, Mapping):
    return {str(k): jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [jsonable(v) for v in x]
  if isinstance(x, (bool, np.bool_)):
    return bool(x)
  if isinstance(x, (int, np.integer)):
    return int(x)
  if isinstance(x, (float, np.floating)):
    x = float(x)
    return x if math.isfinite(x) else _nonfinite_name(x)
  if x is None or isinstance(x, str):
    return x
  if hasattr(x, 'to_dict'):
    return jsonable(x.to_dict())
  if callable(x):
    return (
      f'<callable {getattr(x, "__module__", "?")}.{getattr(x, "__qualname__", type(x).__name__)}>'
    )
  return repr(x)


def evaluation_record(
  step: int,
  wall_clock: float,
  bits: tuple[float, float],
  evaluation: Mapping[str, float],
  rule_metrics: Mapping[str, Any] | None = None,
  **extra: Any,
) -> dict[str, Any]:
  """The record of one evaluation, as single runs and sweeps write it.

  Args:
    step: the server step evaluated; wall_clock: its simulated time.
    bits: cumulative (up, down) bits of the run (written as bytes).
    evaluation: the evaluator's metrics (test / validation accuracy and loss).
    rule_metrics: the update rules' per-step metrics of the chunk (``client/...``,
      ``server/...``), written as their mean over the chunk (``client_...``).
    extra: further fields (a single run's staleness statistics, a stop reason).
  """
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


class MetricsWriter:
  """``workdir/metrics.jsonl`` and, optionally, TensorBoard events (see the module docstring).

  The interface of CLU's writers (``write_scalars``, ``write_hparams``, ``flush``,
  ``close``, a context manager), without CLU's TensorFlow dependency.

  Args:
    workdir: the run directory (created if missing); None writes nothing (every process
      but 0 of a multi-process run).
    tensorboard: also write event files to ``workdir/tensorboard`` with tensorboardX
      (without it installed: one warning, ``metrics.jsonl`` only).
    resume_step: on resume from checkpoint step S, TensorBoard drops the events the
      interrupted run wrote after S (``purge_step=S + 1``).
    warn: receives one line per warning (a torn last line repaired on open).
  """

  def __init__(
    self,
    workdir: str | os.PathLike | None,
    *,
    tensorboard: bool = False,
    resume_step: int | None = None,
    warn: Callable[[str], None] = _warn,
  ):
    self.workdir = None if workdir is None else os.fspath(workdir)
    self._f = self._tb = None
    if self.workdir is None:
      return
    make_dirs(self.workdir)  # no link followed (afl_jax/pipeline/workdir.py)
    self.path = os.path.join(self.workdir, METRICS_FILE)
    if os.path.isfile(self.path) and not _ends_with_newline(self.path):
      read_metrics(self.workdir, repair=True, warn=warn)  # repair a torn tail first
    self._f = open_append(self.path)
    if tensorboard:
      try:
        from tensorboardX import SummaryWriter  # lazily: only runs that write events
      except ImportError:
        warn('tensorboardX is not installed (pip install tensorboardX); writing metrics.jsonl only')
      else:
        purge = None if resume_step is None else resume_step + 1
        logdir = make_dirs(os.path.join(self.workdir, TENSORBOARD_DIR))
        self._tb = SummaryWriter(logdir=logdir, purge_step=purge, flush_secs=30)

  def write_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
    """One record at server step ``step``; TensorBoard gets its numbers (not strings)."""
    if self._f is None:
      return
    self._f.write(encode_record(step, scalars) + '\n')
    self._f.flush()
    for name, value in scalars.items() if self._tb is not None else ():
      if hasattr(value, 'item') and getattr(value, 'ndim', 0) == 0:
        value = value.item()
      if isinstance(value, int | float) and not isinstance(value, bool):
        self._tb.add_scalar(name, float(value), global_step=int(step))

  def write_record(self, record: Mapping[str, Any]) -> None:
    """A record of :func:`evaluation_record` (its ``step`` and the rest)."""
    self.write_scalars(record['step'], {k: v for k, v in record.items() if k != 'step'})

  def write_hparams(self, hparams: Mapping[str, Any]) -> None:
    """The resolved config: ``hparams.json``, and a TensorBoard text summary."""
    if self._f is None:
      return
    text = json.dumps(jsonable(hparams), sort_keys=True, indent=2, allow_nan=False)
    write_text(os.path.join(self.workdir, HPARAMS_FILE), text + '\n')
    if self._tb is not None:
      self._tb.add_text('config', '```\n' + text + '\n```', global_step=0)

  def flush(self) -> None:
    if self._f is not None and not self._f.closed:
      self._f.flush()
      os.fsync(self._f.fileno())
    if self._tb is not None:
      self._tb.flush()

  def close(self) -> None:
    """Flush and close; a second call does nothing."""
    self.flush()
    if self._f is not None:
      self._f.close()
    if self._tb is not None:
      self._tb.close()
      self._tb = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
    return False


def _ends_with_newline(path: str) -> bool:
  with open(path, 'rb') as f:
    f.seek(0, os.SEEK_END)
    if f.tell() == 0:
      return True
    f.seek(-1, os.SEEK_END)
    return f.read(1) == b'\n'


def read_metrics(
  workdir: str | os.PathLike,
  *,
  repair: bool = False,
  decode: bool = True,
  warn: Callable[[str], None] = _warn,
) -> list[dict[str, Any]]:
  """The records of ``workdir/metrics.jsonl`` in order ([] if the file does not exist).

  Args:
    workdir: the run directory.
    repair: also rewrite the file without the torn line. A last line cut by a
      crash (not valid JSON) is always dropped from the result with a warning; only
      the process that owns the run should rewrite the file (the writer and
      :func:`truncate_metrics` do): a reader such as a plot script must not
      replace the file under a running writer's open handle.
    decode: turn ``null`` values listed under ``"nonfinite"`` back into NaN / inf.
    warn: receives the one-line warning.

  Raises:
    MetricsError: a line other than the last is not a JSON object.
  """
  path = os.path.join(os.fspath(workdir), METRICS_FILE)
  if not os.path.isfile(path):
    return []
  with open(path, 'rb') as f:
    raw = f.read()
  numbered = [(i, line) for i, line in enumerate(raw.split(b'\n'), start=1) if line.strip()]
  records, good, torn = [], [], None
  for k, (number, line) in enumerate(numbered):
    rec = _parse(line)
    if rec is None:
      if k == len(numbered) - 1 and not _is_record_like(line):
        torn = line
        break
      raise MetricsError(
        f'{path}: line {number} is not a JSON record: {line[:60]!r}; the file is damaged '
        'before its last line (not a crash artifact); fix or delete it'
      )
    records.append(rec)
    good.append(line.decode())
  rewrite = torn is not None or (raw and not raw.endswith(b'\n'))
  if torn is not None:
    msg = f'{path}: dropped a torn last line ({len(torn)} bytes) left by an interrupted run'
    warn(msg + ('; rewrote the file without it' if repair else ''))
  if repair and rewrite:
    write_text(path, ''.join(line + '\n' for line in good))
  if decode:
    records = [decode_record(r) for r in records]
  return records


def _parse(line: bytes) -> dict | None:
  try:
    rec = json.loads(line)
  except (ValueError, UnicodeDecodeError):
    return None
  return rec if isinstance(rec, dict) and _is_step(rec.get('step')) else None


def _is_record_like(line: bytes) -> bool:
  """A whole JSON object (not a line cut by a crash) that is still not a record."""
  try:
    return isinstance(json.loads(line), dict)
  except (ValueError, UnicodeDecodeError):
    return False


def _is_step(x: Any) -> bool:
  return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def check_file(workdir: str | os.PathLike) -> None:
  """MetricsError naming ``workdir/metrics.jsonl`` when it exists but is not a regular file."""
  path = os.path.join(os.fspath(workdir), METRICS_FILE)
  if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
    kind = 'a symlink' if os.path.islink(path) else 'not a regular file'
    raise MetricsError(
      f'{path} is {kind}; the run writes its metrics there: move it away, or choose another '
      '--workdir'
    )


def truncate_metrics(
  workdir: str | os.PathLike, step: int, *, warn: Callable[[str], None] = _warn
) -> list[dict[str, Any]]:
  """Keep the records with ``record['step'] <= step`` (resume from a checkpoint at ``step``).

  Repairs a torn tail first; rewrites the file atomically; returns the kept records
  (decoded). The file keeps its strict encoding.
  """
  path = os.path.join(os.fspath(workdir), METRICS_FILE)
  records = read_metrics(workdir, repair=True, decode=False, warn=warn)
  kept = [r for r in records if r['step'] <= step]
  if os.path.isfile(path) and len(kept) != len(records):
    write_text(path, ''.join(json.dumps(r, sort_keys=True, allow_nan=False) + '\n' for r in kept))
  return [decode_record(dict(r)) for r in kept]


def first_reaching(
  records: Sequence[Mapping[str, Any]], target: float, key: str = 'test_accuracy'
) -> Mapping[str, Any] | None:
  """The first record whose ``key`` is >= ``target`` (a record without it counts as 0).

  Its ``step``, ``wall_clock`` and ``bytes_up`` are the run's time to target; None when
  no record reaches it.
  """
  return next((r for r in records if r.get(key, 0) >= target), None)


def final_summary(records: Sequence[Mapping[str, Any]], target: float = 0.0) -> dict[str, Any]:
  """A run's final metrics and time to target, as single runs and sweeps summarize it.

  The last record's step, simulated clock, bytes and every accuracy and loss it holds;
  the run's best validation accuracy where it has a validation split; for ``target`` >
  0, the step, simulated clock and bytes up of the first evaluation whose test
  accuracy reaches it (:func:`first_reaching`; None where none does), the reading the
  reproductions score.
  """
  final = records[-1]
  out = {
    'steps': final['step'],
    'wall_clock': final['wall_clock'],
    'bytes_up': final['bytes_up'],
    'bytes_down': final['bytes_down'],
    **{k: v for k, v in final.items() if k.endswith(('accuracy', 'loss'))},
  }
  if 'val_accuracy' in final:
    out['best_val_accuracy'] = max(r['val_accuracy'] for r in records if 'val_accuracy' in r)
  if target > 0:
    hit = first_reaching(records, target)
    out['target_accuracy'] = target
    out['steps_to_target'] = hit['step'] if hit else None
    out['wall_clock_to_target'] = hit['wall_clock'] if hit else None
    out['bytes_up_to_target'] = hit['bytes_up'] if hit else None
  return out
