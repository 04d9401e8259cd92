"""``train_and_evaluate(config, workdir)``: one run, evaluated, checkpointed and written.

Everything is built and checked first; the lifecycle of :mod:`track`, which a sweep's group
shares, then runs chunks of ``eval_every`` server steps, evaluates, writes and checkpoints
(one folder: the run's). docs/reliability.md says what a workdir holds and what a rerun
does; docs/distributed.md, several processes."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import jax
import ml_collections

from afl_jax.core import memory
from afl_jax.core.simulator import Simulator
from afl_jax.errors import ResumeError
from afl_jax.pipeline import checkpoint, metrics_io, plotting, processes
from afl_jax.pipeline import record as record_lib
from afl_jax.pipeline import track as track_lib
from afl_jax.pipeline import workdir as workdir_lib
from afl_jax.pipeline.build import Run, build_run


class NonFiniteError(RuntimeError):
  """Training produced NaN/inf; the metrics so far are on disk."""


def refuse_other_kind(workdir: str, kind: str) -> None:
  """ResumeError when ``workdir`` holds the other kind of run (``kind``: 'sweep' or 'single
  run'), or a ``summary.json`` of neither: a run never writes over another's outputs."""
  summary = workdir_lib.read_json(os.path.join(workdir, record_lib.SUMMARY_FILE), strict=False)
  single = os.path.isfile(os.path.join(workdir, record_lib.CONFIG_FILE))
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


def train_and_evaluate(
  config: ml_collections.ConfigDict, workdir: str, *, resume: bool = True, log=print
) -> dict[str, Any]:
  """Run one experiment; returns its summary (also ``summary.json``).

  ``resume``: continue the run of the same identity in ``workdir`` where it stopped (a
  finished one is not run again); False deletes its outputs first. A user error
  (:class:`~afl_jax.errors.UserError`) is one line, before compute; NonFiniteError when
  training diverged (the metrics so far are written)."""
  writes = processes.is_writer()
  lock = workdir_lib.acquire(workdir) if writes else None
  progress = {'doing': 'starting', 'step': None}
  try:
    return _train(config, workdir, resume, log if writes else lambda *a: None, writes, progress)
  except OSError as e:
    disk = workdir_lib.disk_error(e, workdir)
    if disk is None or not writes:
      raise
    step = progress['step']
    kept = (
      f'the metrics up to server step {step} are in {workdir}/{metrics_io.METRICS_FILE}; free '
      'space (or make it writable) and run the same command to resume from the last checkpoint'
      if step is not None
      else 'nothing was computed yet'
    )
    raise workdir_lib.write_error(workdir, disk, progress['doing'], kept) from None
  finally:
    if lock is not None:
      lock.release()


def _train(config, workdir, resume, log, writes, progress) -> dict[str, Any]:
  """The lifecycle of :mod:`track` for a Program of one run, in its folder ``workdir``, bound to
  its identity and program: everything built and checked before compute (:func:`build_run`,
  then process 0 refuses the workdir of another run and finds where it continues)."""
  run = build_run(config)
  c, schedule, sim = run.config, run.schedule, run.sim
  binding = record_lib.binding(run.identity, record_lib.program(sim))
  program = track_lib.Program(sim, run.key, run.params0, [run], [workdir], workdir, binding)
  progress['doing'] = 'writing the run files'

  def on_writer() -> int | None:
    refuse_other_kind(workdir, 'single run')
    if not resume:
      track_lib.start_over(workdir)
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


def _finish(
  run: Run, workdir: str, sim: Simulator | None, writes: bool, seconds: float, log
) -> dict:
  """The run's summary from its records (written by process 0), logged; NonFiniteError if
  it diverged."""
  c = run.config
  processes.barrier('afl_jax records')
  rec = record_lib.read(workdir)
  summary = rec.summary() | {'dataset': c.dataset, 'run_seconds': seconds}
  summary |= {'schedule': run.schedule.stats(), 'devices': jax.device_count()}
  if sim is not None:
    summary['memory_bytes'] = dict(sim.memory)
  if writes:
    plotting.plot_runs(
      {c.algorithm: rec.records}, os.path.join(workdir, 'plot.png'), title=c.algorithm
    )
    text = json.dumps(metrics_io.jsonable(summary), indent=2, sort_keys=True, allow_nan=False)
    workdir_lib.write_text(os.path.join(workdir, record_lib.SUMMARY_FILE), text + '\n')
  acc = summary.get('test_accuracy')
  log(
    f'summary: {rec.status}: {rec.steps} steps, test accuracy '
    f'{"null" if acc is None else f"{acc:.4f}"}, sim clock {summary["wall_clock"]:.1f}, '
    f'{summary["bytes_up"] / 1e6:.1f} MB up, {seconds:.1f}s'
  )
  sys.stdout.flush()
  if rec.status.startswith('diverged'):
    stop = next(r['stopped'] for r in rec.records if r.get('stopped'))
    raise NonFiniteError(stop)
  return summary
