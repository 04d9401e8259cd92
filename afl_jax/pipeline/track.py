"""The one lifecycle of a compiled program over its runs: a single run (one) and a sweep's
group (one per replica) alike, a :class:`Program`: ``check`` refuses run folders of other
runs, ``begin`` finds where they continue, ``run`` restores or starts them and drives the
one chunk loop
(:meth:`Simulator.drive`): after each chunk every run's :class:`Track` gets its metrics and
params, which it evaluates, records and writes (a non-finite value marks the record
``stopped``); :class:`Cadence` says where to checkpoint and stop."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from afl_jax.core.simulator import Simulator
from afl_jax.pipeline import checkpoint, metrics_io, processes, record, workdir
from afl_jax.schedules.schedule import Schedule

# What --noresume deletes from a run folder (a single run's or a sweep's).
OUTPUTS = ('config.json', 'schedule.npz', 'metrics.jsonl', 'summary.json', 'plot.png')
OUTPUTS += ('hparams.json', 'tensorboard', checkpoint.CHECKPOINT_DIR)

HOST_FIELDS = ('bits_up', 'bits_down', 'tau_sum', 'arrivals')


def new_host() -> dict[str, np.ndarray]:
  """Zeroed accumulators: cumulative bits up and down, staleness sum, arrivals."""
  return {k: np.zeros((), np.float64) for k in HOST_FIELDS}


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
    bad = next(  # (index, name) of the first non-finite value, names in sorted order
      (
        (int(np.argmax(~np.isfinite(v))), k)
        for k, v in sorted(rule.items())
        if not np.isfinite(v).all()
      ),
      None,
    )
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


@dataclasses.dataclass(frozen=True)
class Cadence:
  """Where a run's chunks end (every ``eval_every`` server steps), are checkpointed (every
  ``checkpoint_every``; 0: never) and where this invocation stops (``stop_after_steps`` after
  its first step; 0: at the end); read from the config once, when the run is built."""

  eval_every: int
  checkpoint_every: int = 0
  stop_after_steps: int = 0

  def due(self, first: int, end: int, num_steps: int) -> tuple[bool, bool]:
    """(checkpoint, stop) after the chunk ending at server step ``end`` of a run this
    invocation started at ``first``; neither at the end of the run (a stop is checkpointed)."""
    stop = bool(self.stop_after_steps) and end - first >= self.stop_after_steps
    every = bool(self.checkpoint_every) and end % self.checkpoint_every == 0
    return end < num_steps and (stop or every), end < num_steps and stop


def _stacked(tracks: list[Track], batched: bool) -> dict[str, np.ndarray]:
  """The tracks' accumulators as a checkpoint holds them: [R] for a sweep's group."""
  if not batched:
    return tracks[0].host
  return {f: np.stack([np.asarray(t.host[f]) for t in tracks]) for f in HOST_FIELDS}


def train(
  sim: Simulator,
  params0: Any,
  keys: Any,
  tracks: list[Track],
  ckpt: checkpoint.Checkpointer,
  start: int | None,
  cadence: Cadence,
  after_chunk: Callable[[list[Track], int], str | None] = lambda tracks, end: None,
  progress: dict | None = None,
) -> tuple[Any, str]:
  """The one lifecycle of a single run (one track) and of a sweep's group (one track per
  replica): the state initialized (its memory was checked when the run was planned) or
  restored from ``ckpt``'s checkpoint of server step ``start``; on a fresh start every track
  evaluated at step 0; then the chunk loop (:meth:`Simulator.drive`) handing each track its
  metrics and params, ``after_chunk(tracks, end)`` (a status it returns stops there),
  checkpoints and the stop where ``cadence`` says. The writers and ``ckpt`` are closed at the
  end; ``progress`` (``'doing'``, ``'step'``) says what was being written (a disk error's).
  Returns ``(state, status)``."""
  progress = {} if progress is None else progress
  state = sim.init(params0, keys)
  if start is not None:
    state, host = ckpt.restore(start, state, _stacked(tracks, sim.batched))
    for i, t in enumerate(tracks):
      t.host = {f: np.asarray(v[i]) for f, v in host.items()} if sim.batched else host
  first = start or 0  # where this invocation starts
  mine = lambda x, i: jax.tree.map(lambda a: a[i], x) if sim.batched else x  # noqa: E731

  def chunk_end(state: Any, pos: int, out: dict) -> str | None:
    params, end = sim.params(state), sim.position(state)
    for i, t in enumerate(tracks):
      metrics = mine(out['metrics'], i)
      stop_at = min(pos + len(metrics['arrivals']), t.schedule.num_steps)
      if stop_at > t.records[-1]['step']:  # else this replica's schedule has ended
        t.advance({k: v[: stop_at - pos] for k, v in metrics.items()}, pos, mine(params, i))
    status = after_chunk(tracks, end)
    if status is not None:
      return status
    save, stop = cadence.due(first, end, sim.num_steps)
    if save:
      for t in tracks:
        t.writer.flush()
      progress['doing'] = f'saving the checkpoint of server step {end}'
      with workdir.ctrl_c_after():  # a Ctrl-C leaves this checkpoint whole
        ckpt.save(end, state, _stacked(tracks, sim.batched))
    progress['doing'] = f'writing the metrics after server step {end}'
    return 'stopped' if stop else None

  try:
    if start is None:
      progress['doing'] = 'writing the metrics of server step 0'
      params = sim.params(state)
      for i, t in enumerate(tracks):
        t.start(0, mine(params, i))
    progress['step'] = tracks[0].records[-1]['step']
    return sim.drive(state, keys, chunk_end)
  finally:
    for t in tracks:
      t.writer.close()
    ckpt.close()


def start_over(run_dir: str) -> None:
  """``--noresume``: delete a run folder's outputs (:data:`OUTPUTS`)."""
  for name in OUTPUTS:
    path = os.path.join(run_dir, name)
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path)
    elif os.path.lexists(path):
      os.remove(path)


@dataclasses.dataclass
class Program:
  """One compiled program over its built runs (``build.Run``), the unit of the lifecycle: a
  single run (one, recorded in its workdir) or a sweep's group (one per replica, each in its
  folder); its checkpoints under ``folder``, bound to ``binding`` (identities and program)."""

  sim: Simulator
  keys: Any
  params0: Any
  runs: list
  dirs: list[str]
  folder: str
  binding: str

  @functools.cached_property
  def prog(self) -> dict[str, Any]:
    return record.program(self.sim)

  def checkpointer(self) -> checkpoint.Checkpointer:
    return checkpoint.Checkpointer(self.folder, self.binding)

  def check(self) -> None:
    """Refuse (process 0, before compute and before anything is written) a run folder
    holding a run of other inputs, or of these computed by another program."""
    for d, r in zip(self.dirs, self.runs):
      workdir.make_dirs(d)
      workdir.check_target(os.path.join(d, metrics_io.METRICS_FILE))
      record.refuse(d, r.identity, r.config, self.prog)

  def begin(self) -> int | None:
    """Where the runs continue (process 0; :func:`checkpoint.start`); each run folder gets its
    ``config.json`` (config, identity and program) and ``schedule.npz``."""
    ckpt, steps = self.checkpointer(), [r.schedule.num_steps for r in self.runs]
    try:
      start = checkpoint.start(self.dirs, steps, self.runs[0].cadence.eval_every, ckpt)
    finally:
      ckpt.close()
    for d, r in zip(self.dirs, self.runs):
      workdir.make_dirs(d)
      text = record.config_text(r.config, r.identity, self.prog)
      workdir.write_text(os.path.join(d, record.CONFIG_FILE), text)
      workdir.write_schedule(d, r.schedule)
    return start

  def run(
    self,
    start: int | None,
    after_chunk: Callable[[list[Track], int], str | None] = lambda tracks, end: None,
    progress: dict | None = None,
    tensorboard: bool = False,
  ) -> tuple[Any, str]:
    """:func:`train` from ``start`` (None: step 0), each run's records in its folder (a
    resumed run's read from it; process 0 writes)."""
    tracks = []
    for d, r in zip(self.dirs, self.runs):
      records = metrics_io.read_metrics(d) if start is not None else []
      writer = metrics_io.MetricsWriter(
        d if processes.is_writer() else None, tensorboard=tensorboard, resume_step=start
      )
      if tensorboard and start is None:
        writer.write_hparams(record.canonical(r.config))
      stop = next((x['stopped'] for x in records if x.get('stopped')), None)
      tracks.append(Track(r.schedule, r.evaluator, writer, records, stopped=stop))
    ckpt, cadence = self.checkpointer(), self.runs[0].cadence
    return train(
      self.sim, self.params0, self.keys, tracks, ckpt, start, cadence, after_chunk, progress
    )
