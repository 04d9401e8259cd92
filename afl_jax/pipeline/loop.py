"""``train_and_evaluate(config, workdir)``: run, evaluate, checkpoint and write.

Everything is built (and the config validated) by
:func:`afl_jax.pipeline.build.build_run` before anything is written or compiled; this
loop only drives the engine in chunks of ``eval_every`` server steps, evaluates
between chunks, and writes into ``workdir``:

* ``config.json`` (the resolved config) and ``schedule.npz``;
* ``metrics.jsonl`` (strict JSON, one record per evaluation) and TensorBoard
  events in ``tensorboard/`` (afl_jax/pipeline/metrics_io.py);
* ``plot.png`` and ``summary.json`` at the end;
* orbax checkpoints every ``checkpoint_every`` steps and where ``stop_after_steps``
  stops (afl_jax/pipeline/checkpoint.py): a workdir holding a run with a different
  config or identity (data digest, device count, engine plan:
  afl_jax/pipeline/run_identity.py) is refused (``ResumeError``), a damaged latest
  checkpoint, or one whose metrics are not all on disk, falls back to the previous
  one; a longer ``num_rounds`` continues as the longer run (:func:`ring_plan`).

One writer per workdir (afl_jax/pipeline/workdir.py): the workdir is locked first
(a second writer is refused, naming the holder), a workdir holding a sweep is
refused, and a write that fails for the disk's reason (full, read-only) stops the
run with one line: the metrics written so far stay in ``metrics.jsonl`` and the last
intact checkpoint resumes it.

Several processes (``jax.distributed``, docs/distributed.md): every process builds,
runs and evaluates the same program (SPMD); process 0 alone decides the resume step
(it reads and may repair the workdir; the others get its answer) and writes the
files above except the checkpoints, whose shards every process writes (orbax). The
workdir must be on a filesystem every process sees.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import ml_collections

from afl_jax import models
from afl_jax.core import memory, ring
from afl_jax.core.engine import to_host
from afl_jax.core.simulator import Simulator
from afl_jax.errors import UserError
from afl_jax.pipeline import checkpoint, metrics_io, plotting, run_identity, sizes
from afl_jax.pipeline import track as track_lib
from afl_jax.pipeline import workdir as workdir_lib
from afl_jax.pipeline.build import Run, build_run, build_schedule, engine_options


class NonFiniteError(RuntimeError):
  """Training produced NaN/inf; the metrics so far are on disk."""


def _quiet(*args: Any) -> None:
  del args  # processes other than 0 do not log progress


def _local(evaluate: Callable[[Any], dict]) -> Callable[[Any], dict]:
  """The evaluator on a host copy of the params when the mesh spans several processes.

  The global params are replicated on every process; each evaluates its own copy on
  its own device (the same numbers everywhere, no collective). 1 process: as is.
  """
  if jax.process_count() == 1:
    return evaluate
  return lambda params: evaluate(jax.tree.map(to_host, params))


# How far past its end a run looks for the jobs still running then: min(T, max(this,
# 4 tau_max)) more steps (a job still running after that is found missing on extension).
LOOKAHEAD_STEPS = 64


def ring_plan(run: Run) -> ring.RingPlan | None:
  """The ring buffer's plan of ``run``, keeping the jobs still running after its last step.

  Those are read off the schedule built for more rounds (the same past: builders draw
  step by step), so that a later ``num_rounds`` extension finds every start model in
  the last checkpoint (afl_jax/core/ring.py). Where the longer schedule has another
  past (drawn whole) or cannot be built, nothing is kept past the end; a resume then
  checks the checkpoint's ring against the plan (Checkpointer.restore).
  """
  if run.algorithm.regime != 'per_job':
    return None
  t = run.schedule.num_steps
  longer_config = run.config.copy_and_resolve_references()
  ahead = max(LOOKAHEAD_STEPS, 4 * run.schedule.max_staleness)
  longer_config.num_rounds = t + min(t, ahead)
  try:
    longer = build_schedule(longer_config, run.local_steps, run.data.sizes)
  except (UserError, ValueError):
    longer = None
  pending = None
  if longer is not None and checkpoint.first_difference(run.schedule, longer, t) is None:
    pending = ring.pending_versions(longer, t)
  return ring.plan(run.schedule, pending)


def make_simulator(run: Run, plan: ring.RingPlan | None = None) -> Simulator:
  """The engine for ``run`` (plans memory; raises InsufficientMemoryError if it cannot fit)."""
  c = run.config
  plans = {} if plan is None else {'ring_plans': [plan]}
  return Simulator(
    run.algorithm,
    run.problem,
    run.schedule,
    chunk_size=c.eval_every,
    **plans,
    **engine_options(c),
  )


def train_and_evaluate(
  config: ml_collections.ConfigDict, workdir: str, *, resume: bool = True, log=print
) -> dict[str, Any]:
  """Run one experiment; returns the summary (also written to ``summary.json``).

  Args:
    config: the experiment config (see afl_jax/pipeline/config.py).
    workdir: the output directory.
    resume: continue from the latest checkpoint of the same run in ``workdir``;
      False deletes its checkpoints and metrics first.
    log: receives one line per progress message.

  Raises:
    UserError (ConfigError, DataError, ResumeError, ...): a bad input, before compute.
    WorkdirError: ``workdir`` is busy (another live writer), not a writable
      directory, holds a sweep, or a write failed for the disk's reason (the metrics
      so far are on disk).
    NonFiniteError: training produced NaN/inf (metrics so far are written).
  """
  writes = checkpoint.is_writer()  # process 0 (of 1 or more) writes the shared files
  lock = workdir_lib.acquire(workdir) if writes else None
  progress = {'doing': 'starting', 'step': None}
  try:
    if writes:
      workdir_lib.refuse_other(workdir, 'single run')
    return _train(config, workdir, resume, log if writes else _quiet, writes, progress)
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


def _train(
  config: ml_collections.ConfigDict,
  workdir: str,
  resume: bool,
  log: Callable[[str], None],
  writes: bool,
  progress: dict[str, Any],
) -> dict[str, Any]:
  """train_and_evaluate's body; ``progress`` says what it is writing and what is on disk."""
  run = build_run(config)
  c, schedule = run.config, run.schedule
  progress['doing'] = 'writing the run files'
  if writes:
    os.makedirs(workdir, exist_ok=True)
    if not resume:
      checkpoint.start_over(workdir)
  checkpoint.barrier('afl_jax workdir')
  plan = ring_plan(run)
  sim = None
  with sizes.memory_guard(c, lambda: sim.memory if sim is not None else None):
    sim = make_simulator(run, plan)  # plans device memory before allocating anything
  ident = run_identity.of_run(run, sim)
  last = None if plan is None else ring.last_use(schedule)  # the reads of this run
  layout = None if plan is None else (plan, last)
  ckpt = checkpoint.Checkpointer(workdir)

  def check_resume() -> int | None:
    metrics_io.check_file(workdir)
    records = lambda: metrics_io.read_metrics(workdir, warn=lambda m: None)
    return ckpt.check_resume(c, schedule, ident, records=records, ring_layout=layout)

  resume_step = checkpoint.on_writer(check_resume, 'resume')
  if resume_step is not None and layout is not None and not writes:
    ckpt.prepare_ring(resume_step, layout)  # as process 0 did, before it records the run
  checkpoint.barrier('afl_jax resume')
  if writes:
    ckpt.record_run(c, schedule, checkpointed=c.checkpoint_every > 0, identity=ident)
    workdir_lib.write_schedule(workdir, schedule)
  stats = schedule.stats()
  log(
    f'afl_jax: {c.algorithm} on {c.dataset} ({run.data.num_clients} clients, {c.model}, '
    f'{models.count_params(run.params0)} params), schedule {c.schedule.kind}: '
    f'T={stats["num_steps"]}, M={stats["max_arrivals"]}, tau_avg={stats["tau_avg"]:.3f}, '
    f'tau_max={stats["tau_max"]}'
  )

  with sizes.memory_guard(c, lambda: sim.memory):
    state = sim.init(run.params0, run.key)
  log(
    f'{memory.format_report(sim.memory)}; ring buffer {sim.ring_size} models; '
    f'{sim.num_devices} device(s)'
  )
  host, records = track_lib.new_host(), []
  held = None if plan is None else ring.held_versions(plan, 0)  # version in each slot
  if resume_step is not None:
    state, host = ckpt.restore(resume_step, state, host, layout)
    if plan is not None:
      held = ckpt.held if ckpt.held is not None else ring.held_versions(plan, resume_step)
    if writes:
      records = metrics_io.truncate_metrics(workdir, resume_step)
    checkpoint.barrier('afl_jax metrics')
    if not writes:  # the same records as process 0, read only (same branches below)
      records = [r for r in metrics_io.read_metrics(workdir) if r['step'] <= resume_step]
    log(f'resumed from checkpoint at server step {resume_step}')
  elif writes:
    metrics_path = os.path.join(workdir, metrics_io.METRICS_FILE)
    if os.path.exists(metrics_path):
      os.remove(metrics_path)
    shutil.rmtree(os.path.join(workdir, metrics_io.TENSORBOARD_DIR), ignore_errors=True)
  writer = metrics_io.MetricsWriter(
    workdir if writes else None, tensorboard=True, resume_step=resume_step
  )
  track = track_lib.Track(schedule, _local(run.evaluator), writer, records, host)
  t_run, start_pos = time.time(), sim.position(state)
  next_end = lambda end: min(end + sim.chunk_size, schedule.num_steps)

  ring_at = {'held': held, 'step': sim.position(state)}

  def checkpoint_meta(end: int) -> dict[str, Any]:
    """What a checkpoint at ``end`` records beside the state (see Checkpointer.save)."""
    meta = {'metrics_steps': [int(r['step']) for r in track.records]}
    if plan is not None:
      ring_at['held'] = ring.advance(ring_at['held'], plan, ring_at['step'], end)
      ring_at['step'] = end
      meta['ring_versions'] = [int(v) for v in ring_at['held']]
    return meta

  def after_chunk(state: Any, end: int) -> str | None:
    record = track.records[-1]
    progress['step'] = end
    elapsed = time.time() - t_run
    rate = (end - start_pos) / max(elapsed, 1e-9)
    eta = (schedule.num_steps - end) / max(rate, 1e-9)
    log(
      f'step {end}/{schedule.num_steps} | test acc {record["test_accuracy"]:.4f} | test loss '
      f'{record["test_loss"]:.4f} | sim clock {record["wall_clock"]:.1f} | '
      f'{rate:.2f} steps/s | ETA {eta:.0f}s'
    )
    if track.stopped is not None:
      log(f'stopping: {track.stopped}; metrics so far are in {workdir}/{metrics_io.METRICS_FILE}')
      return track.stopped
    stop = c.stop_after_steps and end - start_pos >= c.stop_after_steps
    stop = stop and end < schedule.num_steps
    if (c.checkpoint_every and end % c.checkpoint_every == 0) or stop:  # a stop can resume
      writer.flush()
      progress['doing'] = f'saving the checkpoint of server step {end}'
      ckpt.save(end, state, track.host, checkpoint_meta(end))
    if stop:
      return 'stopped'
    progress['doing'] = f'writing the metrics of server step {next_end(end)}'
    return None

  done = False
  try:
    if not track.records:  # a fresh run, or a resumed one whose metrics file was lost
      step0 = resume_step or 0
      if resume_step is None:
        writer.write_hparams(json.loads(checkpoint.config_json(c)))
      else:
        log(f'warning: metrics.jsonl held no records up to step {step0}; they are lost')
      progress['doing'] = f'writing the metrics of server step {step0}'
      track.start(step0, sim.params(state))
    progress['step'] = track.records[-1]['step']
    progress['doing'] = f'writing the metrics of server step {next_end(progress["step"])}'
    try:
      state, status = track_lib.drive(sim, state, run.key, [track], after_chunk)
    except KeyboardInterrupt:  # recorded in summary.json below, then raised again
      status = f'interrupted (Ctrl-C) after server step {track.records[-1]["step"]}'
    done = True
  finally:
    try:
      writer.close()
      ckpt.close()
    except OSError:
      if done:
        raise  # else the first failure is the one to report

  records = track.records
  summary = summarize(c, records, status, time.time() - t_run, stats, sim)
  summary['data_sha256'] = ident['data_sha256']  # what it trained and evaluated on
  progress['doing'] = 'writing plot.png and summary.json'
  if writes:
    plotting.plot_runs(
      {c.algorithm: records},
      os.path.join(workdir, 'plot.png'),
      title=f'{c.algorithm} on {c.dataset}',
    )
    workdir_lib.write_text(
      os.path.join(workdir, 'summary.json'),
      json.dumps(metrics_io.jsonable(summary), indent=2, sort_keys=True, allow_nan=False),
    )
  final = records[-1]
  log(
    f'summary: {status}: {final["step"]} steps, test accuracy '
    f'{summary["test_accuracy"]:.4f}, sim clock {final["wall_clock"]:.1f}, '
    f'{final["bytes_up"] / 1e6:.1f} MB up, {summary["run_seconds"]:.1f}s'
  )
  sys.stdout.flush()
  if status.startswith('non-finite'):
    raise NonFiniteError(status)
  if status.startswith('interrupted'):
    raise KeyboardInterrupt(  # one line and exit status 130 (cli.run)
      f'{status}; the metrics so far are in {workdir}/{metrics_io.METRICS_FILE} and the '
      'status in summary.json; the same command continues from the last checkpoint'
    )
  return summary


def summarize(
  c: ml_collections.ConfigDict,
  records: list[dict],
  status: str,
  seconds: float,
  stats: dict,
  sim: Simulator,
) -> dict[str, Any]:
  """The run's summary: final metrics, schedule statistics, memory, target reached."""
  return {
    'algorithm': c.algorithm,
    'dataset': c.dataset,
    'status': status,
    **metrics_io.final_summary(records, c.target_accuracy),
    'run_seconds': seconds,
    'schedule': stats,
    'memory_bytes': dict(sim.memory),
    'ring_buffer_models': sim.ring_size,
    'devices': sim.num_devices,
  }
