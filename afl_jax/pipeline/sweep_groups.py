"""A sweep's groups on disk: run, checkpoint and resume each; what happened to each run.

A group of replicas (one compile, afl_jax/pipeline/sweep.py) is run by :func:`run_group`
under ``<workdir>/groups/<k>/``: its checkpoints every ``checkpoint_every`` steps
(afl_jax/pipeline/checkpoint.py; the replicas' state and their host accumulators,
stacked) while it runs, ``done.json`` once it finished. Run again, a finished group is
not run again (every run's records are checked whole), an interrupted one continues
from its latest intact checkpoint with each run's ``metrics.jsonl`` truncated to that
step, and a run whose records have a gap starts the group over: in every case the
records equal an uninterrupted group's.

:func:`run_summary` is a run's entry of ``summary.json``, with its ``status``
(``completed`` or ``stopped: diverged at step S (QUANTITY)``); :func:`outcome` counts
the runs that diverged; :func:`identity` is what besides the config decides a sweep's
numbers (its data, devices and platform), recorded in ``sweep.json`` and checked when
the sweep continues (:func:`refuse_other_identity`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from afl_jax.core.memory import format_bytes
from afl_jax.pipeline import build as build_lib
from afl_jax.pipeline import checkpoint, metrics_io, run_identity, sizes
from afl_jax.pipeline import track as track_lib
from afl_jax.pipeline import workdir as workdir_lib

GROUPS_DIR = 'groups'  # groups/<k>/checkpoints while group k runs, groups/<k>/done.json after
DONE_FILE = 'done.json'


def _warn(message: str) -> None:
  print(f'warning: {message}', file=sys.stderr, flush=True)


def _expected_steps(num_steps: int, chunk: int, total: int, upto: int) -> list[int]:
  """The steps whose records a replica of ``num_steps`` steps holds once its group (chunks of
  ``chunk`` steps, ``total`` in all) ran ``upto`` steps, as :func:`track.drive` writes them."""
  ends = [min(k * chunk, total) for k in range(1, -(-total // chunk) + 1)]
  return sorted({0} | {min(e, num_steps) for e in ends if e <= upto})


def _whole(records: list[dict], expected: list[int]) -> bool:
  return [r.get('step') for r in records] == expected


def _done(gdir: str, names: list[str]) -> dict | None:
  """The group's info when it finished earlier (``done.json`` naming the same runs)."""
  done = workdir_lib.read_json(os.path.join(gdir, DONE_FILE), strict=False)
  ok = isinstance(done, dict) and done.get('runs') == names and isinstance(done.get('info'), dict)
  return done['info'] if ok else None


def run_group(k, names, runs, build_group, workdir, log) -> dict:
  """Group ``k``: one compile for ``runs``; writes each run's metrics; returns the group's info.

  A group that finished earlier (``groups/<k>/done.json``, every run's records whole) is
  not run again. Otherwise it continues from its latest intact checkpoint
  (``groups/<k>/checkpoints``, every ``checkpoint_every`` steps; each run's
  ``metrics.jsonl`` truncated to that step) or starts at step 0; a run whose records up
  to the checkpoint have a gap (a hand-damaged file) starts the group over, with a
  warning. Either way the records equal those of an uninterrupted group.
  """
  c = runs[0].config
  gdir = os.path.join(workdir, GROUPS_DIR, str(k))
  dirs = [os.path.join(workdir, n) for n in names]
  chunk = int(c.eval_every)
  total = max(int(run.schedule.num_steps) for run in runs)
  info = _done(gdir, names)
  if info is not None:
    full = [_expected_steps(int(r.schedule.num_steps), chunk, total, total) for r in runs]
    if all(_whole(metrics_io.read_metrics(d), e) for d, e in zip(dirs, full)):
      log(f'group {k}: its {len(runs)} runs finished earlier; not run again')
      return info
    _warn(f'{workdir_lib.show(gdir)}: a finished run of this group lost records; running it again')
  t0 = time.time()
  sim, keys, params0 = build_group()
  with sizes.memory_guard(c, lambda: sim.memory):
    state = sim.init(params0, keys)
  ckpt = checkpoint.Checkpointer(gdir, warn=_warn)
  host = {f: np.zeros(len(runs), np.float64) for f in track_lib.HOST_FIELDS}
  step = ckpt.latest_step() if ckpt.steps() else None
  records: list[list[dict]] = [[] for _ in runs]
  if step is not None:
    state, host = ckpt.restore(step, state, host)
    kept = [metrics_io.truncate_metrics(d, step) for d in dirs]
    upto = [_expected_steps(int(r.schedule.num_steps), chunk, total, step) for r in runs]
    if all(_whole(recs, e) for recs, e in zip(kept, upto)):
      records = kept
      log(f'group {k}: resumed from its checkpoint at server step {step}')
    else:
      _warn(
        f'{workdir_lib.show(gdir)}: the records of a run have a gap before the checkpoint '
        f'at step {step}; running the group again from step 0'
      )
      state, host = sim.init(params0, keys), {f: np.zeros_like(v) for f, v in host.items()}
      step = None
      ckpt.close()  # its steps would be saved again, equal: orbax saves no step below them
      shutil.rmtree(ckpt.directory, ignore_errors=True)
  if step is None:
    for d in dirs:
      if os.path.isfile(os.path.join(d, metrics_io.METRICS_FILE)):
        os.remove(os.path.join(d, metrics_io.METRICS_FILE))
  tracks = []
  for i, (d, run) in enumerate(zip(dirs, runs)):
    if step is None or not os.path.isfile(os.path.join(d, RUN_CONFIG)):
      workdir_lib.make_dirs(d)  # every value this run ran with, as it started
      workdir_lib.write_text(os.path.join(d, RUN_CONFIG), run_config(run) + '\n')
    if step is None or not os.path.isfile(os.path.join(d, workdir_lib.SCHEDULE_FILE)):
      workdir_lib.write_schedule(d, run.schedule)  # the arrays it runs on, as a single run's
    one = {f: np.asarray(v[i]) for f, v in host.items()}
    stop = next((r['stopped'] for r in records[i] if r.get('stopped')), None)
    writer = metrics_io.MetricsWriter(d)
    tracks.append(track_lib.Track(run.schedule, run.evaluator, writer, records[i], one, stop))
  try:
    if step is None:
      params = sim.params(state)
      for i, track in enumerate(tracks):
        track.start(0, jax.tree.map(lambda a, i=i: a[i], params))
    chunk_ends = []  # when each chunk was recorded: the first includes the compile

    def after_chunk(state: Any, end: int) -> None:
      chunk_ends.append(time.time())
      if c.checkpoint_every and end % c.checkpoint_every == 0 and end < sim.num_steps:
        for track in tracks:
          track.writer.flush()
        stacked = {f: np.stack([np.asarray(t.host[f]) for t in tracks]) for f in host}
        with workdir_lib.ctrl_c_after():  # a Ctrl-C leaves this checkpoint whole
          ckpt.save(end, state, stacked)

    track_lib.drive(sim, state, keys, tracks, after_chunk)
  finally:
    for track in tracks:
      track.writer.close()
    ckpt.close()
  compile_s = chunk_ends[0] - t0 if chunk_ends else None
  seconds = time.time() - t0
  log(
    f'group {k} of {len(runs)} runs: compile + first chunk {compile_s or 0:.1f}s, total '
    f'{seconds:.1f}s; simulation state about {format_bytes(sim.memory["total"])} (analytic)'
  )
  info = {'runs': len(runs), 'compile_seconds': compile_s, 'seconds': seconds, 'mode': sim.mode}
  workdir_lib.make_dirs(gdir)
  workdir_lib.write_text(
    os.path.join(gdir, DONE_FILE),
    json.dumps(metrics_io.jsonable({'runs': names, 'info': info}), allow_nan=False) + '\n',
  )
  shutil.rmtree(ckpt.directory, ignore_errors=True)  # finished: never resumed again
  return info


RUN_CONFIG = 'config.json'  # in each run's folder: its resolved config, written as it started


def run_config(run: build_lib.Run) -> str:
  """A grid point's resolved config (every value it ran with), as canonical JSON."""
  return checkpoint.config_json(run.config, indent=1)


_DIVERGED = re.compile(r'non-finite (\S+) at server step (\d+)')


def run_summary(
  name: str, point: Mapping[str, Any], run: build_lib.Run, records: list[dict], run_dir: str
) -> dict:
  """One run's entry of summary.json: its values, its status and its final metrics.

  ``status`` is ``completed``, or ``stopped: diverged at step S (QUANTITY)`` for a run
  whose rule metric or evaluation became non-finite (:class:`track.Track`); a diverged
  run's accuracies and losses are null, never a number that looks like a result.
  """
  c = run.config
  target = float(c.get('target_accuracy', 0.0) or 0.0)
  s = {
    'name': name,
    'method': c.algorithm,
    'seed': int(c.seed),
    'hparams': {k: v for k, v in point.items() if k != 'seed'},
    'config': workdir_lib.read_json(os.path.join(run_dir, RUN_CONFIG), strict=False)
    or json.loads(run_config(run)),  # as the run started; as now if that file is gone
    'status': 'completed',
    **metrics_io.final_summary(records, target),
  }
  stop = next((r['stopped'] for r in records if r.get('stopped')), None)
  if stop is not None:
    m = _DIVERGED.search(stop)
    at, what = (int(m[2]), m[1]) if m else (None, stop)
    s['status'] = f'stopped: diverged at step {at} ({what})'
    s['diverged'] = {'step': at, 'quantity': what}
    for key in s:
      if key.endswith(('accuracy', 'loss')) and key != 'target_accuracy':
        s[key] = None
  return s


def outcome(summary: Mapping[str, Any]) -> tuple[int, str]:
  """(number of runs that diverged, the sweep's last line)."""
  runs = summary.get('runs') or []
  bad = [r for r in runs if r.get('status', 'completed') != 'completed']
  line = f'sweep: {len(runs)} runs, {len(runs) - len(bad)} completed, {len(bad)} diverged'
  if bad:
    shown = ', '.join(f'{r["name"]} ({r["status"][len("stopped: ") :]})' for r in bad[:5])
    line += f': {shown}' + (f' and {len(bad) - 5} more' if len(bad) > 5 else '')
  return len(bad), line


def identity(first: build_lib.Run) -> dict[str, Any]:
  """What besides the config decides a sweep's numbers: the data files (a SHA-256 of the
  first grid point's arrays: every point loads the same files) and the devices."""
  return {
    'data_sha256': run_identity.data_digest(first.data),
    'devices': jax.device_count(),
    'platform': jax.default_backend(),
  }


def refuse_other_identity(saved: dict, ident: dict[str, Any], workdir: str) -> None:
  """WorkdirError (one line) when the sweep in ``workdir`` ran on other data or devices."""
  old = saved.get('identity')
  if not isinstance(old, dict):
    return  # recorded before identities were: nothing to compare
  why = {
    'data_sha256': 'the data differs from the files it trained on (config.data_dir or '
    '$AFL_JAX_DATA names other files)',
    'devices': f'it ran on {old.get("devices")} device(s), this process has '
    f'{ident["devices"]} ($AFL_JAX_CPU_DEVICES on the CPU)',
    'platform': f'it ran on {old.get("platform")}, this process on {ident["platform"]} '
    '($JAX_PLATFORMS)',
  }
  changed = [text for key, text in why.items() if old.get(key) != ident[key]]
  if changed:
    raise workdir_lib.WorkdirError(
      f'workdir {workdir_lib.show(workdir)} holds a sweep this invocation would not continue '
      f'exactly ({workdir_lib.SWEEP_FILE}): {"; ".join(changed)}; run it as it ran, or choose '
      'another --workdir'
    )


__all__ = [
  'DONE_FILE',
  'GROUPS_DIR',
  'identity',
  'outcome',
  'refuse_other_identity',
  'run_group',
  'run_summary',
]
