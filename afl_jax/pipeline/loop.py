"""The one lifecycle of a compiled program over its built runs (:class:`Program`): a single run
and a sweep's group alike (docs/reliability.md: what a workdir holds, what a rerun does)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import ml_collections
import numpy as np

from afl_jax.core import memory
from afl_jax.core.simulator import Simulator
from afl_jax.errors import ResumeError
from afl_jax.pipeline import checkpoint, metrics_io, plotting, processes, record
from afl_jax.pipeline import workdir as workdir_lib
from afl_jax.pipeline.build import Run, build_run
from afl_jax.schedules.schedule import Schedule

# What --noresume deletes from a run folder (a single run's or a sweep's).
OUTPUTS = ('config.json', 'schedule.npz', 'metrics.jsonl', 'summary.json', 'plot.png')
OUTPUTS += ('hparams.json', 'tensorboard', checkpoint.CHECKPOINT_DIR)
HOST_FIELDS = ('bits_up', 'bits_down', 'tau_sum', 'arrivals')  # a run's host accumulators


class NonFiniteError(RuntimeError):
  """Training produced NaN/inf; the metrics so far are on disk."""


@dataclasses.dataclass
class Track:
  """One run's schedule, evaluator, writer, records, host accumulators and why it stopped."""

  schedule: Schedule
  evaluate: Callable[[Any], dict]
  writer: metrics_io.MetricsWriter
  records: list[dict] = dataclasses.field(default_factory=list)
  host: dict[str, np.ndarray] = dataclasses.field(
    default_factory=lambda: {k: np.zeros((), np.float64) for k in HOST_FIELDS}
  )
  stopped: str | None = None

  def _write(self, record: dict) -> dict:
    self.records.append(record)
    self.writer.write_record(record)
    return record

  def start(self, step: int, params: Any) -> dict:
    clock = self.schedule.wall_clock[step - 1] if step else 0.0
    bits = (self.host['bits_up'], self.host['bits_down'])
    return self._write(metrics_io.evaluation_record(step, clock, bits, self.evaluate(params)))

  def advance(self, metrics: Mapping[str, np.ndarray], pos: int, params: Any) -> dict:
    m = {k: np.asarray(v) for k, v in metrics.items()}
    end = pos + len(m['arrivals'])
    h, s = self.host, self.schedule
    h['bits_up'] = h['bits_up'] + m['bits_up'].astype(np.float64).sum()
    h['bits_down'] = h['bits_down'] + m['bits_down'].astype(np.float64).sum()
    h['tau_sum'] = h['tau_sum'] + s.staleness[pos:end].sum()
    h['arrivals'] = h['arrivals'] + s.mask[pos:end].sum()
    rule = {k: v for k, v in m.items() if k.startswith(('client/', 'server/'))}
    bad = next(  # (step, name) of the first non-finite value, names in sorted order
      ((pos + int(np.argmax(~np.isfinite(v))), k) for k, v in sorted(rule.items())
       if not np.isfinite(v).all()),
      None,
    )  # fmt: skip
    ev = self.evaluate(params)
    if bad is None and not all(np.isfinite(v) for v in ev.values()):
      bad = (end - 1, next(k for k, v in ev.items() if not np.isfinite(v)))
    record = metrics_io.evaluation_record(
      end, s.wall_clock[end - 1], (h['bits_up'], h['bits_down']), ev, rule,
      tau_avg=float(h['tau_sum'] / max(h['arrivals'], 1)), tau_max=int(s.staleness[:end].max()),
    )  # fmt: skip
    if bad is not None and self.stopped is None:
      self.stopped = record['stopped'] = f'non-finite {bad[1]} at server step {bad[0]}'
    return self._write(record)


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
  """One compiled program over its built runs, each in its folder; checkpoints under
  ``folder``, bound to ``binding`` (identities and program)."""

  sim: Simulator
  keys: Any
  params0: Any
  runs: list[Run]
  dirs: list[str]
  folder: str
  binding: str

  @functools.cached_property
  def prog(self) -> dict[str, Any]:
    return record.program(self.sim)

  def checkpointer(self) -> checkpoint.Checkpointer:
    return checkpoint.Checkpointer(self.folder, self.binding)

  def check(self) -> None:
    """Refuse (process 0, before any write) a folder holding a run of other inputs or program."""
    for d, r in zip(self.dirs, self.runs):
      workdir_lib.make_dirs(d)
      workdir_lib.check_target(os.path.join(d, metrics_io.METRICS_FILE))
      record.refuse(d, r.identity, r.config, self.prog)

  def begin(self) -> int | None:
    """Where the runs continue (:func:`checkpoint.start`); writes config.json, schedule.npz."""
    ckpt, steps = self.checkpointer(), [r.schedule.num_steps for r in self.runs]
    try:
      start = checkpoint.start(self.dirs, steps, self.runs[0].cadence.eval_every, ckpt)
    finally:
      ckpt.close()
    for d, r in zip(self.dirs, self.runs):
      workdir_lib.make_dirs(d)
      text = record.config_text(r.config, r.identity, self.prog)
      workdir_lib.write_text(os.path.join(d, record.CONFIG_FILE), text)
      workdir_lib.write_schedule(d, r.schedule)
    return start

  def run(
    self, start: int | None, after_chunk=None, progress: dict | None = None, tensorboard=False
  ) -> tuple[Any, str]:
    """From ``start`` (None: step 0) through the chunk loop (:meth:`Simulator.drive`): each
    track gets its metrics, ``after_chunk(tracks, end)`` may stop, checkpoints where the
    Cadence says; ``progress`` says what is being written. Returns ``(state, status)``."""
    sim, progress = self.sim, {} if progress is None else progress
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

    def hosts() -> dict[str, np.ndarray]:  # as a checkpoint holds them: [R] for a group
      if not sim.batched:
        return tracks[0].host
      return {f: np.stack([np.asarray(t.host[f]) for t in tracks]) for f in HOST_FIELDS}

    state = sim.init(self.params0, self.keys)
    if start is not None:
      state, host = ckpt.restore(start, state, hosts())
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
      status = after_chunk(tracks, end) if after_chunk else None
      if status is not None:
        return status
      save, stop = cadence.due(first, end, sim.num_steps)
      if save:
        for t in tracks:
          t.writer.flush()
        progress['doing'] = f'saving the checkpoint of server step {end}'
        with workdir_lib.ctrl_c_after():  # a Ctrl-C leaves this checkpoint whole
          ckpt.save(end, state, hosts())
      progress['doing'] = f'writing the metrics after server step {end}'
      return 'stopped' if stop else None

    try:
      if start is None:
        progress['doing'] = 'writing the metrics of server step 0'
        params = sim.params(state)
        for i, t in enumerate(tracks):
          t.start(0, mine(params, i))
      progress['step'] = tracks[0].records[-1]['step']
      return sim.drive(state, self.keys, chunk_end)
    finally:
      for t in tracks:
        t.writer.close()
      ckpt.close()


def refuse_other_kind(workdir: str, kind: str) -> None:
  """ResumeError when ``workdir`` holds the other ``kind`` of run, or a summary.json of neither."""
  summary = workdir_lib.read_json(os.path.join(workdir, record.SUMMARY_FILE), strict=False)
  single = os.path.isfile(os.path.join(workdir, record.CONFIG_FILE))
  swept = isinstance(summary, dict) and 'runs' in summary
  if swept and kind != 'sweep':
    other = 'a sweep'
  elif single and kind == 'sweep':
    other = 'a single run (config.json)'
  elif summary is not None and not (swept or single):
    other = 'a summary.json of no run'
  else:
    return
  raise ResumeError(
    f'workdir {workdir_lib.show(workdir)} holds {other}; a {kind} would overwrite its '
    'summary.json and plot.png; choose another --workdir'
  )


@contextlib.contextmanager
def holding(workdir: str, kind: str, doing: dict, kept: Callable[[str], str]) -> Iterator[str]:
  """Process 0 holds ``workdir`` (its path told to all) and refuses the other ``kind`` of run;
  a full or read-only disk is one line: the file, ``doing['doing']``, ``kept(path)``."""
  held, path = [], workdir

  def hold() -> str:
    held.append(workdir_lib.acquire(workdir))
    refuse_other_kind(held[0].path, kind)
    return held[0].path

  try:  # a refusal while holding the workdir releases it too
    path = processes.on_writer(hold, 'the workdir')
    yield path
  except OSError as e:
    disk = workdir_lib.disk_error(e, path)
    if disk is None or not processes.is_writer():
      raise
    raise workdir_lib.write_error(path, disk, doing['doing'], kept(path)) from None
  finally:
    for lock in held:
      lock.release()


def train_and_evaluate(
  config: ml_collections.ConfigDict, workdir: str, *, resume: bool = True, log=print
) -> dict[str, Any]:
  """Run one experiment; returns its summary (also summary.json). ``resume``: continue the run
  of the same identity in ``workdir``; False deletes its outputs first. NonFiniteError when
  training diverged."""
  writes, progress = processes.is_writer(), {'doing': 'starting', 'step': None}

  def kept(path: str) -> str:
    if progress['step'] is None:
      return 'nothing was computed yet'
    return (
      f'the metrics up to server step {progress["step"]} are in {workdir}/'
      f'{metrics_io.METRICS_FILE}; free space (or make it writable) and run the same command '
      'to resume from the last checkpoint'
    )

  with holding(workdir, 'single run', progress, kept):
    return _train(config, workdir, resume, log if writes else lambda *a: None, writes, progress)


def _train(config, workdir, resume, log, writes, progress) -> dict[str, Any]:
  run = build_run(config)
  c, schedule, sim = run.config, run.schedule, run.sim
  binding = record.binding(run.identity, record.program(sim))
  program = Program(sim, run.key, run.params0, [run], [workdir], workdir, binding)
  progress['doing'] = 'writing the run files'

  def on_writer() -> int | None:
    if not resume:
      start_over(workdir)
    program.check()
    return program.begin()

  start = processes.on_writer(on_writer, 'resume')
  processes.barrier('afl_jax preflight')
  if start == checkpoint.DONE:
    log(f'afl_jax: the run in {workdir} finished earlier; not run again')
    return _finish(run, workdir, None, writes, 0.0, log)
  s = schedule.stats()
  log(
    f'afl_jax: {c.algorithm} on {c.dataset} ({run.data.num_clients} clients, {c.model}, '
    f'{run.work["params"]} params), schedule {c.schedule.kind}: '
    f'T={s["num_steps"]}, M={s["max_arrivals"]}, tau_avg={s["tau_avg"]:.3f}, tau_max={s["tau_max"]}'
  )
  log(f'{memory.format_report(run.memory)}; {sim.num_devices} device(s)')
  if start is not None:
    log(f'resumed from checkpoint at server step {start}')
  t_run, first = time.time(), start or 0

  def after_chunk(tracks: list, end: int) -> str | None:  # log; a non-finite value stops
    rec, progress['step'] = tracks[0].records[-1], end
    rate = (end - first) / max(time.time() - t_run, 1e-9)
    log(
      f'step {end}/{schedule.num_steps} | test acc {rec["test_accuracy"]:.4f} | test loss '
      f'{rec["test_loss"]:.4f} | sim clock {rec["wall_clock"]:.1f} | {rate:.2f} steps/s | '
      f'ETA {(schedule.num_steps - end) / max(rate, 1e-9):.0f}s'
    )
    return tracks[0].stopped

  interrupted = False
  try:
    program.run(start, after_chunk, progress, tensorboard=True)
  except KeyboardInterrupt:  # summary.json says where it stopped, then one line
    interrupted = True
  summary = _finish(run, workdir, sim, writes, time.time() - t_run, log)
  if interrupted:
    raise KeyboardInterrupt(
      f'interrupted (Ctrl-C) after server step {summary["steps"]}; the metrics so far are in '
      f'{workdir}/{metrics_io.METRICS_FILE}; the same command continues from the last checkpoint'
    )
  return summary


def _finish(run: Run, workdir: str, sim: Simulator | None, writes: bool, seconds: float, log):
  c = run.config
  processes.barrier('afl_jax records')
  rec = record.read(workdir)
  summary = rec.summary() | {'dataset': c.dataset, 'run_seconds': seconds}
  summary |= {'schedule': run.schedule.stats(), 'devices': jax.device_count()}
  if sim is not None:
    summary['memory_bytes'] = dict(sim.memory)
  if writes:
    path = os.path.join(workdir, 'plot.png')
    plotting.plot_runs({c.algorithm: rec.records}, path, title=c.algorithm)
    text = json.dumps(record.jsonable(summary), indent=2, sort_keys=True, allow_nan=False)
    workdir_lib.write_text(os.path.join(workdir, record.SUMMARY_FILE), text + '\n')
  acc = summary.get('test_accuracy')
  log(
    f'summary: {rec.status}: {rec.steps} steps, test accuracy '
    f'{"null" if acc is None else f"{acc:.4f}"}, sim clock {summary["wall_clock"]:.1f}, '
    f'{summary["bytes_up"] / 1e6:.1f} MB up, {seconds:.1f}s'
  )
  sys.stdout.flush()
  if rec.status.startswith('diverged'):
    raise NonFiniteError(next(r['stopped'] for r in rec.records if r.get('stopped')))
  return summary
