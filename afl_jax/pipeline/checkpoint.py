"""Orbax checkpoints, each step with a manifest (its binding, step and files' SHA-256, which
orbax does not check) verified before use, and the step a rerun continues from
(:func:`start`); docs/reliability.md, "Where a rerun starts" and "Checkpoints"."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import resource
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from afl_jax.errors import ResumeError
from afl_jax.pipeline import metrics_io
from afl_jax.pipeline import record as record_lib
from afl_jax.pipeline.processes import barrier, is_writer
from afl_jax.pipeline.workdir import read_json, show, write_text

CHECKPOINT_DIR = 'checkpoints'
MANIFEST = 'afl_jax.json'  # in each step's folder, written after orbax's save completed
DONE = -1  # start(): every run finished
INCOMPLETE = f'it has no readable {MANIFEST} (its save did not complete)'


@contextlib.contextmanager
def _quiet_orbax():
  logger = logging.getLogger('absl')
  level = logger.level
  logger.setLevel(max(level, logging.WARNING))
  try:
    yield
  finally:
    logger.setLevel(level)


def _abstract(x: Any) -> Any:
  if isinstance(x, jax.Array):
    return ocp.utils.to_shape_dtype_struct(x)  # keeps the sharding
  return jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype)


def _files(folder: str) -> dict[str, str]:
  """``{relative path: SHA-256}`` of the files below ``folder`` but the manifest; OSError for
  a link."""
  out = {}
  for root, dirs, files in os.walk(folder):
    for name in sorted(dirs) + sorted(files):
      path = os.path.join(root, name)
      if os.path.islink(path):
        raise OSError(errno.ELOOP, 'a symbolic link inside the checkpoint', path)
      if name in files and (rel := os.path.relpath(path, folder)) != MANIFEST:
        h = hashlib.sha256()
        with open(path, 'rb') as f:
          for chunk in iter(lambda: f.read(1 << 22), b''):  # noqa: B023 (called in the loop)
            h.update(chunk)
        out[rel] = h.hexdigest()
  return dict(sorted(out.items()))


class Checkpointer:
  """A run's checkpoints under ``<workdir>/checkpoints``, bound to ``binding``
  (:func:`afl_jax.pipeline.record.binding`)."""

  def __init__(self, workdir: str | os.PathLike, binding: str):
    self.directory = os.path.join(os.path.abspath(os.fspath(workdir)), CHECKPOINT_DIR)
    self.binding, self._manager = binding, None

  @property
  def manager(self) -> ocp.CheckpointManager:
    if self._manager is None:
      with _quiet_orbax():
        options = ocp.CheckpointManagerOptions(max_to_keep=3, enable_async_checkpointing=False)
        self._manager = ocp.CheckpointManager(self.directory, options=options)
    return self._manager

  def steps(self) -> list[int]:
    """Steps orbax finished, ascending (without a manager, whose constructor waits for every
    process)."""
    paths = ocp.path.step.checkpoint_steps_paths(self.directory)
    return sorted(int(p.name) for p in paths if p.name.isdigit())

  def folder(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def save(self, step: int, sim_state: Any, host: dict[str, Any]) -> None:
    """Save ``step``, then its manifest; no room is an OSError naming the step's folder."""
    item = {'sim': sim_state, 'host': {k: np.asarray(v) for k, v in host.items()}}
    where = self.folder(step)
    size = sum(int(x.nbytes) for x in jax.tree.leaves(item))
    os.makedirs(self.directory, exist_ok=True)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    for code, short in (
      (errno.ENOSPC, shutil.disk_usage(self.directory).free),
      (errno.EFBIG, limit),
    ):
      if short != resource.RLIM_INFINITY and short < size + (1 << 20):
        raise OSError(code, os.strerror(code), where)
    try:
      with _quiet_orbax():
        self.manager.save(step, args=ocp.args.StandardSave(item))
        self.manager.wait_until_finished()
    except ValueError as e:
      code = re.search(r"os_error_code='(\d+)'", str(e))
      if code is None:
        raise
      raise OSError(int(code[1]), os.strerror(int(code[1])), where) from None
    barrier('afl_jax checkpoint saved')
    if is_writer():  # every process's files are in place: process 0 digests them
      manifest = {'binding': self.binding, 'step': step, 'files': _files(where)}
      write_text(os.path.join(where, MANIFEST), json.dumps(manifest, indent=1) + '\n')

  def check(self, step: int) -> str | None:
    """Why the checkpoint of ``step`` may not be used (None: it passes its manifest)."""
    where = self.folder(step)
    manifest = read_json(os.path.join(where, MANIFEST), strict=False)
    if not isinstance(manifest, dict) or not isinstance(manifest.get('files'), dict):
      return INCOMPLETE
    if manifest.get('binding') != self.binding:
      return 'it was saved by another run (other inputs or another program)'
    if manifest.get('step') != step:
      return f'it holds server step {manifest.get("step")}, not {step} (a renamed folder)'
    try:
      files = _files(where)
    except OSError as e:
      return f'{e.strerror}: {e.filename}'
    saved = manifest['files']
    for what, names in (
      ('is missing', sorted(set(saved) - set(files))),
      ('was added', sorted(set(files) - set(saved))),
      ('changed', sorted(f for f in set(files) & set(saved) if files[f] != saved[f])),
    ):
      if names:
        more = f' (and {len(names) - 1} more)' if len(names) > 1 else ''
        return f'its file {names[0]}{more} {what} since it was saved'
    return None

  def restore(self, step: int, sim_template: Any, host_template: dict) -> tuple[Any, dict]:
    """The state saved at ``step`` in the templates' structure, or ResumeError naming it."""
    template = {'sim': sim_template, 'host': {k: np.asarray(v) for k, v in host_template.items()}}
    try:
      with _quiet_orbax():
        item = self.manager.restore(
          step, args=ocp.args.StandardRestore(jax.tree.map(_abstract, template))
        )
      sim = jax.tree.unflatten(jax.tree.structure(sim_template), jax.tree.leaves(item['sim']))
      host = {k: np.asarray(item['host'][k]) for k in host_template}
      if jax.tree.map(np.shape, sim) != jax.tree.map(np.shape, sim_template):
        raise ValueError('its arrays have other shapes than this run needs')
    except Exception as e:  # noqa: BLE001 (tensorstore raises its own kinds): one line
      first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
      raise ResumeError(
        f'cannot restore the checkpoint {show(self.folder(step))} ({first}); delete it to '
        'continue from the one before, or pass --noresume to start over'
      ) from None
    return sim, host

  def delete_after(self, step: int) -> None:
    later = [s for s in self.steps() if s > step]
    for s in later:
      shutil.rmtree(os.path.join(self.directory, str(s)))
    if later:
      self.close()  # orbax caches the steps it found

  def close(self) -> None:
    if self._manager is not None:
      with _quiet_orbax():
        self._manager.close()
      self._manager = None


def expected_steps(num_steps: int, chunk: int, total: int, upto: int) -> list[int]:
  """The evaluation steps of a run of ``num_steps`` after ``upto`` steps of a program of
  ``total`` steps in chunks of ``chunk``."""
  ends = [min(k * chunk, total) for k in range(1, -(-total // chunk) + 1)]
  return sorted({0} | {min(e, num_steps) for e in ends if e <= upto})


def finished(run_dir: str, num_steps: int, chunk: int) -> bool:
  """Did the run in ``run_dir`` complete or diverge, with no evaluation missing?"""
  records = metrics_io.read_metrics(run_dir)
  steps = [r['step'] for r in records]
  whole = expected_steps(num_steps, chunk, num_steps, num_steps)
  diverged = record_lib.status(records, num_steps).startswith('diverged')
  return bool(steps) and (steps == whole or (diverged and steps == whole[: len(steps)]))


def start(
  dirs: Sequence[str],
  num_steps: Sequence[int],
  chunk: int,
  ckpt: Checkpointer,
  warn: Callable[[str], None] = metrics_io.warn,
) -> int | None:
  """Where the runs in ``dirs`` continue: ``DONE``, the latest checkpoint whose records are on
  disk and that passes its check (a warning for each later one; those deleted, records
  truncated), None (step 0: none, or only saves cut before their manifest); ResumeError when
  none passes or every one follows lost records."""
  if all(finished(d, t, chunk) for d, t in zip(dirs, num_steps)):
    return DONE
  total = max(num_steps)
  steps = [[r['step'] for r in metrics_io.read_metrics(d)] for d in dirs]
  lost, failed = None, []
  for step in reversed(ckpt.steps()):
    wanted = [expected_steps(t, chunk, total, step) for t in num_steps]
    missing = [i for i, (s, w) in enumerate(zip(steps, wanted)) if s[: len(w)] != w]
    if missing:
      lost = missing[0] if lost is None else lost
      continue
    why = ckpt.check(step)
    if why is not None:
      failed.append((step, why))
      continue
    for bad, why in failed:
      warn(
        f'skipped the checkpoint {show(ckpt.folder(bad))}: {why}; continuing from the one of '
        f'server step {step}'
      )
    ckpt.delete_after(step)
    for d in dirs:
      metrics_io.truncate_metrics(d, step)
    return step
  if any(why != INCOMPLETE for _, why in failed):
    bad, why = failed[0]
    others = f' (and {len(failed) - 1} earlier)' if len(failed) > 1 else ''
    raise ResumeError(
      f'the checkpoint {show(ckpt.folder(bad))}{others} fails its check: {why}; no checkpoint '
      'of this run passes, so nothing is resumed: pass --noresume to start over'
    )
  for bad, _ in failed:  # only saves cut before their manifest: as if orbax had not finished
    warn(f'skipped the checkpoint {show(ckpt.folder(bad))}: {INCOMPLETE}; starting over')
  if lost is not None and not failed:
    path = os.path.join(dirs[lost], metrics_io.METRICS_FILE)
    raise ResumeError(
      f'{show(path)} lacks evaluation records that every checkpoint in {show(ckpt.directory)} '
      'follows, so resuming would leave a gap; restore the file, or pass --noresume to start over'
    )
  ckpt.delete_after(-1)
  for d in dirs:
    with contextlib.suppress(FileNotFoundError):
      os.remove(os.path.join(d, metrics_io.METRICS_FILE))
  return None
