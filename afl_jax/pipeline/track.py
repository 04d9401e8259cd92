"""The one loop of single runs and sweeps: :func:`drive` runs a simulator chunk by chunk and
hands each run's :class:`Track` its metrics and params, which it evaluates, records and
writes; a non-finite value marks the record ``stopped``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from afl_jax.core.simulator import Simulator
from afl_jax.pipeline import metrics_io
from afl_jax.schedules.schedule import Schedule

HOST_FIELDS = ('bits_up', 'bits_down', 'tau_sum', 'arrivals')


def new_host() -> dict[str, np.ndarray]:
  """Zeroed accumulators: cumulative bits up and down, staleness sum, arrivals."""
  return {k: np.zeros((), np.float64) for k in HOST_FIELDS}


def first_nonfinite(metrics: Mapping[str, np.ndarray]) -> tuple[int, str] | None:
  """(index, name) of the first non-finite value, names in sorted order; None if all finite."""
  for name, values in sorted(metrics.items()):
    bad = ~np.isfinite(np.asarray(values))
    if bad.any():
      return int(np.argmax(bad)), name
  return None


@dataclasses.dataclass
class Track:
  """One run's schedule, evaluator, writer, records (a resumed run's from disk),
  accumulators (:func:`new_host`) and why it stopped."""

  schedule: Schedule
  evaluate: Callable[[Any], dict]
  writer: metrics_io.MetricsWriter
  records: list[dict] = dataclasses.field(default_factory=list)
  host: dict[str, np.ndarray] = dataclasses.field(default_factory=new_host)
  stopped: str | None = None

  def _write(self, record: dict) -> dict:
    self.records.append(record)
    self.writer.write_record(record)
    return record

  def start(self, step: int, params: Any) -> dict:
    """The evaluation of ``params`` at server step ``step`` (0, or a resumed run's step)."""
    clock = self.schedule.wall_clock[step - 1] if step else 0.0
    bits = (self.host['bits_up'], self.host['bits_down'])
    return self._write(metrics_io.evaluation_record(step, clock, bits, self.evaluate(params)))

  def advance(self, metrics: Mapping[str, np.ndarray], pos: int, params: Any) -> dict:
    """The record after the steps from ``pos`` whose ``metrics`` are given; ``params``: after
    the last of them."""
    m = {k: np.asarray(v) for k, v in metrics.items()}
    n = len(m['arrivals'])
    end = pos + n
    h, s = self.host, self.schedule
    h['bits_up'] = h['bits_up'] + m['bits_up'].astype(np.float64).sum()
    h['bits_down'] = h['bits_down'] + m['bits_down'].astype(np.float64).sum()
    h['tau_sum'] = h['tau_sum'] + s.staleness[pos:end].sum()
    h['arrivals'] = h['arrivals'] + s.mask[pos:end].sum()
    rule = {k: v for k, v in m.items() if k.startswith(('client/', 'server/'))}
    bad = first_nonfinite(rule)
    ev = self.evaluate(params)
    if bad is None and not all(np.isfinite(v) for v in ev.values()):
      bad = (n - 1, next(k for k, v in ev.items() if not np.isfinite(v)))
    record = metrics_io.evaluation_record(
      end,
      s.wall_clock[end - 1],
      (h['bits_up'], h['bits_down']),
      ev,
      rule,
      tau_avg=float(h['tau_sum'] / max(h['arrivals'], 1)),
      tau_max=int(s.staleness[:end].max()),
    )
    if bad is not None and self.stopped is None:
      self.stopped = f'non-finite {bad[1]} at server step {pos + bad[0]}'
      record['stopped'] = self.stopped
    return self._write(record)


def due(config: Any, first: int, end: int, num_steps: int) -> tuple[bool, bool]:
  """(checkpoint, stop) after the chunk ending at server step ``end`` of a run this invocation
  started at ``first``: every ``checkpoint_every`` steps, and where ``stop_after_steps``
  stops (then checkpointed); neither at the end of the run."""
  stop = bool(config.stop_after_steps) and end - first >= config.stop_after_steps
  every = bool(config.checkpoint_every) and end % config.checkpoint_every == 0
  return end < num_steps and (stop or every), end < num_steps and stop


def drive(
  sim: Simulator,
  state: Any,
  key: Any,
  tracks: list[Track],
  after_chunk: Callable[[Any, int], str | None] = lambda state, end: None,
) -> tuple[Any, str]:
  """Run ``sim`` to its end, feeding every track (one per replica); ``after_chunk(state,
  end)`` runs after each chunk and a status it returns stops there. ``(state, status)``."""
  replicas = sim.batched
  while (pos := sim.position(state)) < sim.num_steps:
    state, out = sim.run_chunk(state, key)
    params = sim.params(state)
    for i, track in enumerate(tracks):
      mine = (lambda t, i=i: jax.tree.map(lambda a: a[i], t)) if replicas else (lambda t: t)
      metrics = mine(out['metrics'])
      end = min(pos + len(metrics['arrivals']), track.schedule.num_steps)
      if end > track.records[-1]['step']:  # else this replica's schedule has ended
        track.advance({k: v[: end - pos] for k, v in metrics.items()}, pos, mine(params))
    status = after_chunk(state, sim.position(state))
    if status is not None:
      return state, status
  return state, 'completed'
