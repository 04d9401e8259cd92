"""Checkpoints that can only resume the run that wrote them, and survive damaged files.

A checkpoint (orbax, one directory per server step under ``workdir/checkpoints``)
holds the engine's :class:`~afl_jax.core.engine.SimState` plus the run's host-side
accumulators. Randomness is a function of (seed, step), so no RNG state is saved.
Beside the orbax files this module keeps, all under ``workdir/checkpoints``:

* ``run.json``: the **fingerprint** of the run: the resolved config (canonical
  JSON), the number of server steps, a SHA-256 of the schedule arrays, a SHA-256 of
  the data (:func:`data_digest`) and the engine facts that change the arithmetic
  (device count and platform, arrival slots, client blocks);
* ``schedule.npz``: the schedule the checkpoints were computed under (so a longer
  ``num_rounds`` can be checked against the past it would resume);
* ``<step>/afl_manifest.json``: the SHA-256 and size of every file of that step,
  written after orbax finished the step (orbax does not notice bit flips in tensor
  data; the manifest does), the version each ring slot holds (``ring_versions``: a
  resume under a longer ``num_rounds`` moves them where its plan reads them) and
  the steps of the evaluation records written before it (``metrics_steps``: a
  checkpoint whose records are not all on disk is passed over, never resumed
  with a gap).

The loop calls, in this order (see afl_jax/pipeline/loop.py)::

  ckpt = Checkpointer(workdir)
  step = ckpt.check_resume(config, schedule, identity, records=..., ring_layout=...)
  ckpt.record_run(config, schedule, identity=identity)  # only if accepted
  state = sim.init(...)
  if step is not None:
    state, host = ckpt.restore(step, state, host, ring_layout)
  ...
  ckpt.save(end, state, host, meta)

``check_resume`` refuses (:class:`~afl_jax.errors.ResumeError`, one line) a
workdir whose run differs from the requested one, naming every differing field
``old -> new`` (or the data, the device count, ``num_rounds``, the damaged file);
it never writes anything then, so ``config.json`` still says what
ran. Fields in :data:`RESUME_FREE_FIELDS` describe how a run is observed, not what
it computes, and may change between invocations. ``num_rounds`` may change when
the new schedule's first S steps (S = the checkpointed step) are identical to the
saved schedule's; otherwise the resumed run would continue a past that the new
config does not describe.

A damaged checkpoint (a file missing, truncated or with flipped bits, a missing
manifest after a crash mid-save) is moved to ``workdir/damaged_checkpoints/``
(nothing is deleted) with a one-line warning, and the previous intact one is
used. If checkpoints exist but none is intact, :class:`ResumeError` says so;
``--noresume`` (:func:`start_over`) deletes checkpoints and metrics and starts over.

What orbax's CheckpointManager (orbax-checkpoint 0.12.8) already guarantees, and is
therefore not repeated here: a step is written into ``<step>.orbax-checkpoint-tmp-*``
and renamed when finished (``_src/path/atomicity.py:AtomicRenameTemporaryPath.finalize``),
so a save killed midway never shows as a step (:meth:`Checkpointer.steps` lists steps
through orbax's ``path.step.checkpoint_steps_paths``); ``max_to_keep`` pruning; and the
shape and dtype of every saved array (``_METADATA``, read back by
``StandardCheckpointHandler.metadata``). What it does not do, and this module does:
checksums of the tensor data (orbax restores flipped bytes as wrong values without
an error), a fingerprint that a longer ``num_rounds`` may rewrite (orbax's root
``metadata=`` is written once and never updated: ``CheckpointManager._maybe_save_root_metadata``),
refusing a template whose shapes differ (orbax restores the saved shapes instead),
and moving a damaged step aside instead of using or deleting it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from afl_jax.core import ring
from afl_jax.core.engine import to_host
from afl_jax.errors import ResumeError, UserError
from afl_jax.pipeline import run_identity
from afl_jax.pipeline.metrics_io import jsonable
from afl_jax.pipeline.workdir import SCHEDULE_FILE, read_json, write_schedule, write_text
from afl_jax.schedules import schedule as schedule_lib

__all__ = [
  'RESUME_FREE_FIELDS',
  'Checkpointer',
  'barrier',
  'canonical_config',
  'config_diff',
  'config_json',
  'first_difference',
  'is_writer',
  'on_writer',
  'refuse_changed',
  'schedule_digest',
  'start_over',
  'verify_step',
  'write_manifest',
]

MANIFEST = 'afl_manifest.json'
RUN_FILE = 'run.json'
CHECKPOINT_DIR = 'checkpoints'
DAMAGED_DIR = 'damaged_checkpoints'
# Outputs of a run that --noresume deletes (besides the checkpoints).
METRICS_FILES = ('metrics.jsonl', 'summary.json', 'plot.png')
METRICS_DIRS = ('tensorboard',)

# Config fields that may differ between the run that wrote a checkpoint and the run
# resuming it: they change what is evaluated, logged, plotted or saved, and when the
# run stops, never the training trajectory (the engine's results do not depend on
# the chunk size, tested bitwise). A dotted name matches that field; a name ending
# in '.' matches a whole section. Loops may pass more with ``free_fields=``.
RESUME_FREE_FIELDS = (
  'eval_every',
  'eval_train_samples',
  'checkpoint_every',
  'stop_after_steps',
  'target_accuracy',
  'data_dir',  # where the files are, not what they hold (IDX files are checked on load)
  'download',
  'log_every',
  'tensorboard',
  'plot',
  'logging.',
  'eval.',
)
# Compared through the schedule instead (see the module docstring).
_ROUNDS_FIELD = 'num_rounds'
_ABSENT = '<absent>'


def _warn(message: str) -> None:
  print(f'warning: {message}', file=sys.stderr, flush=True)


@contextlib.contextmanager
def _quiet_orbax():
  """Orbax logs a dozen INFO lines per save through absl; keep warnings only, meanwhile."""
  logger = logging.getLogger('absl')
  level = logger.level
  logger.setLevel(max(level, logging.WARNING))
  try:
    yield
  finally:
    logger.setLevel(level)


# ---- several processes ------------------------------------------------------------------
# Orbax synchronizes its own saves; the resume decision reads files on process 0 alone.
def is_writer() -> bool:
  """Does this process write the run's shared files? (process 0 of a multi-process run)."""
  return jax.process_index() == 0


def barrier(name: str) -> None:
  """Wait until every process got here (a no-op in a 1-process run)."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


_MESSAGE_BYTES = 4096


def on_writer(fn: Callable[[], int | None], name: str) -> int | None:
  """``fn()`` on process 0 only; its result (an int or None) or its UserError on every process.

  For a decision that reads (and may repair) shared files, such as the resume step:
  the other processes do not touch the files, and all of them take the same branch. A
  :class:`~afl_jax.errors.UserError` on process 0 is raised on every process (same
  message). 1 process: just ``fn()``.
  """
  if jax.process_count() == 1:
    return fn()
  from jax.experimental import multihost_utils

  status, value, message = 0, 0, b''
  error = None
  if is_writer():
    try:
      result = fn()
      status, value = (1, 0) if result is None else (2, int(result))
    except UserError as e:
      error, status = e, 3
      message = str(e).encode()[:_MESSAGE_BYTES]
  packed = np.zeros(_MESSAGE_BYTES + 3, np.int64)
  packed[0], packed[1], packed[2] = status, value, len(message)
  packed[3 : 3 + len(message)] = np.frombuffer(message, np.uint8)
  packed = np.asarray(multihost_utils.broadcast_one_to_all(packed))
  status, value, length = (int(v) for v in packed[:3])
  if status == 3:
    if error is not None:
      raise error
    text = bytes(packed[3 : 3 + length].astype(np.uint8)).decode(errors='replace')
    raise ResumeError(f'{text} (process 0, {name})')
  return None if status == 1 else value


# ---- fingerprints --------------------------------------------------------------------
# Orbax's root metadata is written once and never updated, so run.json is written here.
def canonical_config(config: Any) -> dict[str, Any]:
  """The config as plain JSON values (a ConfigDict, FrozenConfigDict or mapping).

  Tuples become lists and floats stay floats, so that the result equals what
  ``json.loads(json.dumps(...))`` returns and saved and requested configs compare
  equal exactly when they hold the same values.
  """
  if hasattr(config, 'to_dict'):
    config = config.to_dict()
  return json.loads(config_json(config))


def config_json(config: Any, indent: int | None = None) -> str:
  """Canonical JSON of a config: sorted keys, strict (no NaN/Infinity literals)."""
  if hasattr(config, 'to_dict'):
    config = config.to_dict()
  return json.dumps(jsonable(config), sort_keys=True, indent=indent, allow_nan=False)


def _flatten(d: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
  out = {}
  for k, v in d.items():
    if isinstance(v, Mapping) and v:
      out.update(_flatten(v, f'{prefix}{k}.'))
    else:
      out[f'{prefix}{k}'] = v
  return out


def _is_free(field: str, free: Iterable[str]) -> bool:
  return any(field == f or (f.endswith('.') and field.startswith(f)) for f in free)


def config_diff(
  old: Mapping[str, Any],
  new: Mapping[str, Any],
  free_fields: Iterable[str] = (),
  *,
  resume: bool = True,
) -> list[tuple[str, Any, Any]]:
  """``[(field, old, new)]`` for every dotted field that differs and is not free.

  A field the old config lacks counts as equal when the new one holds the library's
  default for it (:func:`afl_jax.pipeline.config.default`): a field added to the library
  at its default (which keeps the earlier behaviour) does not refuse earlier runs.
  ``resume=False`` (outputs compared whole, e.g. a sweep's summary): only
  ``free_fields`` are free, not :data:`RESUME_FREE_FIELDS` nor ``num_rounds``.
  """
  from afl_jax.pipeline import config as config_lib  # the pipeline's default config

  free = tuple(free_fields)
  if resume:
    free += tuple(RESUME_FREE_FIELDS) + (_ROUNDS_FIELD,)
  a, b = _flatten(canonical_config(old)), _flatten(canonical_config(new))
  defaults = _flatten(canonical_config(config_lib.default()))
  diffs = []
  for field in sorted(set(a) | set(b)):
    va, vb = a.get(field, _ABSENT), b.get(field, _ABSENT)
    if va is _ABSENT and field in defaults and vb == defaults[field]:
      continue
    if va != vb and not _is_free(field, free):
      diffs.append((field, va, vb))
  return diffs


def refuse_changed(
  saved: Mapping[str, Any],
  config: Any,
  error: type[UserError],
  what: str,
  advice: str,
  free_fields: Iterable[str] = (),
  *,
  resume: bool = True,
) -> None:
  """Raise ``error('WHAT: FIELD OLD -> NEW, ...; ADVICE')`` when :func:`config_diff` finds
  fields of ``config`` that differ from the ``saved`` one (a resumed run, a sweep's workdir)."""
  diffs = config_diff(saved, canonical_config(config), free_fields, resume=resume)
  if diffs:
    listed = ', '.join(f'{f} {_show(a)} -> {_show(b)}' for f, a, b in diffs)
    raise error(f'{what}: {listed}; {advice}')


# Orbax knows nothing of schedules: what a resumed run's past is checked against.
_SCHEDULE_ARRAYS = ('client_ids', 'start_step', 'local_steps', 'mask', 'wall_clock')


def _schedule_rows(schedule: Any, num_steps: int, width: int) -> dict[str, np.ndarray]:
  """The first ``num_steps`` rows, padded to ``width`` slots with canonical padding."""
  t = np.arange(num_steps)[:, None]
  rows = {}
  for name in _SCHEDULE_ARRAYS:
    a = np.asarray(getattr(schedule, name))[:num_steps]
    if a.ndim == 2 and a.shape[1] < width:
      fill = {'client_ids': 0, 'start_step': None, 'local_steps': 1, 'mask': False}[name]
      pad = np.broadcast_to(t if fill is None else fill, (num_steps, width - a.shape[1]))
      a = np.concatenate([a, pad.astype(a.dtype)], axis=1)
    rows[name] = np.ascontiguousarray(a)
  return rows


def schedule_digest(schedule: Any, num_steps: int | None = None) -> str:
  """SHA-256 of a schedule's arrays (its first ``num_steps`` steps) and num_clients."""
  n = schedule.num_steps if num_steps is None else num_steps
  h = hashlib.sha256(f'num_clients={int(schedule.num_clients)};steps={n};'.encode())
  for name, a in _schedule_rows(schedule, n, schedule.max_arrivals).items():
    h.update(f'{name}:{a.dtype.str}:{a.shape};'.encode())
    h.update(a.tobytes())
  return h.hexdigest()


def first_difference(old: Any, new: Any, num_steps: int) -> str | None:
  """Where two schedules differ within their first ``num_steps`` steps (None: identical).

  Padding slots do not count, so a schedule padded to more slots per step compares
  equal to the same arrivals with fewer slots.
  """
  if int(old.num_clients) != int(new.num_clients):
    return f'num_clients {old.num_clients} -> {new.num_clients}'
  if new.num_steps < num_steps:
    return f'the new schedule has {new.num_steps} steps, fewer than the checkpointed {num_steps}'
  width = max(old.max_arrivals, new.max_arrivals)
  a, b = _schedule_rows(old, num_steps, width), _schedule_rows(new, num_steps, width)
  for name in _SCHEDULE_ARRAYS:
    bad = a[name] != b[name]
    if bad.any():
      t = int(np.argwhere(bad)[0][0])
      return f'{name} differs at server step {t}'
  return None


# ---- manifests -----------------------------------------------------------------------
def _sha256(path: str) -> str:
  h = hashlib.sha256()
  with open(path, 'rb') as f:
    for block in iter(lambda: f.read(1 << 20), b''):
      h.update(block)
  return h.hexdigest()


def _files(step_dir: str) -> list[str]:
  out = []
  for root, _, names in os.walk(step_dir):
    for name in names:
      rel = os.path.relpath(os.path.join(root, name), step_dir)
      if rel != MANIFEST:
        out.append(rel)
  return sorted(out)


def _tree_spec(tree: Any) -> dict[str, list]:
  """``{"['sim']['ring']": [shape, dtype]}``, keyed as orbax names the leaves it saves."""
  flat = ocp.tree.to_flat_dict(tree)
  return {
    ''.join(f'[{k!r}]' for k in key): [list(np.shape(x)), str(x.dtype)] for key, x in flat.items()
  }


def _saved_spec(step_dir: str) -> dict[str, list]:
  """The shape and dtype of every array of a step, as orbax recorded them (``_METADATA``)."""
  item_dir = os.path.join(step_dir, ocp.checkpoint_manager.DEFAULT_ITEM_NAME)
  with _quiet_orbax():
    metadata = ocp.StandardCheckpointHandler().metadata(epath.Path(item_dir))
  return _tree_spec(metadata.tree)


# Orbax keeps no checksum of tensor data (only zarr3's shard index has a crc32c, and
# a flipped byte restores as a wrong value), so the step's files are hashed here.
def write_manifest(step_dir: str, meta: Mapping[str, Any] | None = None) -> None:
  """Record size and SHA-256 of every file of a finished step (and ``meta``)."""
  files = {}
  for rel in _files(step_dir):
    path = os.path.join(step_dir, rel)
    files[rel] = [os.path.getsize(path), _sha256(path)]
  write_text(
    os.path.join(step_dir, MANIFEST),
    json.dumps({'format': 1, 'files': files, **jsonable(dict(meta or {}))}, sort_keys=True),
  )


def _manifest(step_dir: str) -> dict[str, Any]:
  """A step's manifest (:func:`verify_step` checked its ``meta`` entries: lists of integers)."""
  return read_json(os.path.join(step_dir, MANIFEST))


def verify_step(step_dir: str) -> str | None:
  """Why the step directory is damaged, or None when every file matches its manifest."""
  try:
    manifest = read_json(os.path.join(step_dir, MANIFEST))
    files = manifest['files']
    for key in _META_LISTS:
      if key in manifest and not _int_list(manifest[key]):
        raise ValueError(f'{key} is not a list of integers')
    items = sorted(files.items())
    checked = [(rel, int(size), str(digest)) for rel, (size, digest) in items]
  except FileNotFoundError:
    return 'no manifest (the save did not finish)'
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    return f'unreadable manifest ({e})'
  for rel, size, digest in checked:
    p = os.path.join(step_dir, rel)
    if not os.path.isfile(p):
      return f'file {rel} is missing'
    if os.path.getsize(p) != size:
      return f'file {rel} has {os.path.getsize(p)} bytes, expected {size} (truncated?)'
    if _sha256(p) != digest:
      return f'file {rel} does not match its checksum (corrupted)'
  return None


_META_LISTS = ('ring_versions', 'metrics_steps')


def _int_list(x: Any) -> bool:
  return isinstance(x, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in x)


# Deletes orbax's steps together with this module's files and the run's metrics.
def start_over(workdir: str | os.PathLike) -> None:
  """``--noresume``: delete the workdir's checkpoints, fingerprint and metrics."""
  workdir = os.fspath(workdir)
  for name in (CHECKPOINT_DIR, DAMAGED_DIR) + METRICS_DIRS:
    shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)
  for name in METRICS_FILES + ('config.json', SCHEDULE_FILE):
    path = os.path.join(workdir, name)
    if os.path.isfile(path):
      os.remove(path)


class Checkpointer:
  """Save / restore ``{'sim': SimState, 'host': dict of arrays}`` under ``workdir/checkpoints``.

  Args:
    workdir: the run directory.
    max_to_keep: how many checkpoints to keep (>= 2 keeps a fallback for a damaged latest).
    free_fields: config fields, beyond :data:`RESUME_FREE_FIELDS`, that may differ on resume.
    warn: receives one line per warning (default: ``warning: ...`` on stderr).
  """

  def __init__(
    self,
    workdir: str | os.PathLike,
    max_to_keep: int = 3,
    *,
    free_fields: Iterable[str] = (),
    warn: Callable[[str], None] = _warn,
  ):
    self.workdir = os.path.abspath(os.fspath(workdir))
    self.directory = os.path.join(self.workdir, CHECKPOINT_DIR)
    self.max_to_keep = max_to_keep
    self.free_fields = tuple(free_fields)
    self.warn = warn
    self._manager = None
    self.resume_held: np.ndarray | None = None  # check_resume's step: version per ring slot
    self.resume_move: np.ndarray | int | None = None  # its slots under the run's plan
    self.held: np.ndarray | None = None  # after restore: version per slot of the run's ring

  @property
  def manager(self) -> ocp.CheckpointManager:
    if self._manager is None:
      with _quiet_orbax():
        self._manager = ocp.CheckpointManager(
          self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=self.max_to_keep)
        )
    return self._manager

  def _reload(self) -> None:  # orbax caches the steps it found when it was constructed
    if self._manager is not None:
      with _quiet_orbax():
        self._manager.close()
      self._manager = None

  def step_dir(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def steps(self) -> list[int]:
    """Steps orbax finalized (intact or not), ascending; a torn save's tmp dir is not one."""
    # orbax's own listing: no CheckpointManager, whose constructor waits for every process.
    paths = ocp.path.step.checkpoint_steps_paths(self.directory)
    return sorted(int(p.name) for p in paths if p.name.isdigit())  # no step prefix here

  def latest_step(self) -> int | None:
    """The latest *intact* step (damaged ones are moved aside with a warning)."""
    for step in reversed(self.steps()):
      why = verify_step(self.step_dir(step))
      if why is None:
        return step
      self._move_aside(step, f'is damaged: {why}', ' and falling back to the previous checkpoint')
    return None

  # Orbax can only delete a step (todelete_subdir also takes max_to_keep's); keep it.
  def _move_aside(self, step: int, why: str, then: str = '') -> None:
    dest_root = os.path.join(self.workdir, DAMAGED_DIR)
    os.makedirs(dest_root, exist_ok=True)
    dest, k = os.path.join(dest_root, str(step)), 1
    while os.path.exists(dest):
      dest, k = os.path.join(dest_root, f'{step}.{k}'), k + 1
    shutil.move(self.step_dir(step), dest)
    self._reload()
    self.warn(f'checkpoint at step {step} in {self.directory} {why}; moved it to {dest}{then}')

  # ---- fingerprint ------------------------------------------------------------------
  def _saved_run(self) -> tuple[dict, str] | None:
    """(run.json content, where it came from) or None for a workdir without a run.

    Checkpoints without a readable ``run.json`` are refused, never restarted over.
    """
    if os.path.lexists(self.directory) and not os.path.isdir(self.directory):
      raise ResumeError(
        f'{self.directory} is not a directory (the checkpoints of a run live there); move it '
        'away, or choose another --workdir'
      )
    run_file = os.path.join(self.directory, RUN_FILE)
    metrics = os.path.join(self.workdir, 'metrics.jsonl')
    has_results = os.path.lexists(metrics)
    if os.path.lexists(run_file):
      run = run_identity.read_run(run_file)
      if run.get('checkpointed') or self.steps() or has_results:
        return run, run_file
      return None  # recorded, then stopped before producing anything: nothing to protect
    if self.steps():  # checkpoints without a fingerprint: never guess what made them
      raise ResumeError(
        f'{self.directory} holds checkpoints but no {RUN_FILE} recording which config made '
        f'them ({run_file} is missing); restore the file, or pass --noresume to delete the '
        'checkpoints and metrics and start over, or choose another --workdir'
      )
    config_file = os.path.join(self.workdir, 'config.json')
    if os.path.isfile(config_file) and has_results:
      saved = read_json(config_file, strict=False)  # torn, without a checkpoint: no run
      return ({'config': saved}, config_file) if isinstance(saved, dict) else None
    return None

  def check_resume(
    self,
    config: Any,
    schedule: Any,
    identity: Mapping[str, Any] | None = None,
    *,
    records: Callable[[], list[dict]] | None = None,
    ring_layout: tuple[ring.RingPlan, np.ndarray] | None = None,
  ) -> int | None:
    """The step to resume from (None: start fresh), or ResumeError; writes nothing else.

    Raises ResumeError when the workdir holds a run (a checkpoint fingerprint, or the
    config.json and metrics of a finished run) whose config differs in a field that
    changes the computation, whose ``identity`` (:func:`run_identity`: the data digest,
    the device count and the engine's plan) differs, when the new schedule does not
    reproduce the checkpointed past, or when every checkpoint is damaged. Damaged
    checkpoints are moved to ``damaged_checkpoints/`` with a warning. ``records()``
    (the metrics on disk): a checkpoint whose metrics are not all there is passed
    over for the latest earlier one whose metrics are, or ResumeError names the file.
    ``ring_layout``: ``(plan, last_use)`` of the run resumed; ResumeError when the
    checkpoint's ring lacks a broadcast the run reads (see :meth:`restore`).
    """
    saved = self._saved_run()
    if saved is None:
      return None
    run, source = saved
    refuse_changed(
      run.get('config', {}),
      config,
      ResumeError,
      f'workdir {self.workdir} holds a run with a different config ({source})',
      'resume it with its own config, or pass --noresume to delete its checkpoints and '
      'metrics and start over, or choose another --workdir',
      self.free_fields,
    )
    if identity is not None:
      run_identity.check(run, source, config, identity, self.workdir)
      if 'data_sha256' not in run:
        self.warn(
          f'{source} predates data digests: cannot check that the data are those the run '
          'trained on (the resumed run records them from now on)'
        )
    if 'schedule_sha256' not in run:  # a finished run without checkpoints, same config
      return None
    step = self.latest_step()
    if step is None:
      if self.steps() or run.get('checkpointed'):
        raise ResumeError(
          f'no intact checkpoint is left in {self.directory} (see the warnings above); pass '
          '--noresume to delete the checkpoints and metrics and start over'
        )
      return None
    if records is not None:
      step = self._with_metrics(step, records())
    self._check_schedule(run, schedule, step)
    if ring_layout is not None:
      self.prepare_ring(step, ring_layout)
    return step

  def prepare_ring(self, step: int, ring_layout: tuple[ring.RingPlan, np.ndarray]) -> None:
    """Where the ring slots of the checkpoint at ``step`` go under ``(plan, last_use)``
    (``self.resume_held``, ``self.resume_move``), or ResumeError naming the broadcast the
    checkpoint lacks. Reads the step's manifest (and, for a step written before manifests
    recorded the ring, the saved run's schedule): call before :meth:`record_run`."""
    self.resume_held = self._held(step)
    if self.resume_held is None:
      return
    plan, last = ring_layout
    self.resume_move = ring.remap(self.resume_held, plan, last, step)
    if isinstance(self.resume_move, int):
      raise ResumeError(
        f'the checkpoint at step {step} in {self.directory} does not hold the broadcast of '
        f'server step {self.resume_move}, which a job of this run reads later '
        '(config.num_rounds changed and the shorter run did not keep it); keep num_rounds '
        'as it was, or pass --noresume to start over'
      )

  def _with_metrics(self, step: int, records: list[dict]) -> int:
    """The latest intact step ``<= step`` whose evaluation records are all on disk."""
    on_disk = {r['step'] for r in records}
    candidates, lost = [s for s in self.steps() if s <= step], []
    for s in reversed(candidates):
      if verify_step(self.step_dir(s)) is not None:
        continue
      wanted = _manifest(self.step_dir(s)).get('metrics_steps')
      if wanted is None:
        wanted = [s]  # written before this record existed: its own step at least
      lost = sorted(set(wanted) - on_disk)
      if not lost:
        if s != step:
          self.warn(
            f'{self.workdir}/metrics.jsonl lacks records the checkpoints after step {s} follow; '
            f'resuming from the checkpoint at step {s}, whose records are all there'
          )
        return s
    path = os.path.join(self.workdir, 'metrics.jsonl')
    raise ResumeError(
      f'{path} lacks evaluation records that every checkpoint in {self.directory} follows '
      f'(e.g. steps {lost[:5]}), so resuming would leave a gap; restore the file, or pass '
      '--noresume to start over'
    )

  def _held(self, step: int) -> np.ndarray | None:
    """The version each ring slot of the checkpoint at ``step`` holds (None: unknown)."""
    held = _manifest(self.step_dir(step)).get('ring_versions')
    if held is not None:
      return np.asarray(held, np.int64)
    try:  # written before manifests recorded it: the plan of the schedule it ran under
      run = run_identity.read_run(os.path.join(self.directory, RUN_FILE))
      old = schedule_lib.load(os.path.join(self.directory, SCHEDULE_FILE))
    except (ResumeError, schedule_lib.ScheduleError):
      return None
    if old.num_steps != run.get('num_steps'):
      return None
    return ring.held_versions(ring.plan(old), step)

  def _check_schedule(self, run: dict, schedule: Any, step: int) -> None:
    if run.get('num_steps') == schedule.num_steps:
      if run['schedule_sha256'] == schedule_digest(schedule):
        return
      why = 'the schedule built from the same config differs from the checkpointed one'
    else:
      why = (
        f'num_rounds changes from {run.get("num_steps")} to {schedule.num_steps} steps, and'
        f' the new schedule'
      )
    path = os.path.join(self.directory, SCHEDULE_FILE)
    try:
      old = schedule_lib.load(path)
    except schedule_lib.ScheduleError as e:
      raise ResumeError(
        f'cannot check the schedule against the checkpointed one: {e}; pass --noresume to '
        'start over'
      ) from e
    where = first_difference(old, schedule, step)
    if where is None and run.get('num_steps') != schedule.num_steps:
      return  # same past, different length: extending (or shortening) is safe
    raise ResumeError(
      f'cannot resume {self.workdir} at server step {step}: {why} '
      f'({where or "differs after the checkpoint"}), so resuming would continue a past the '
      'requested run does not have (e.g. the synchronous schedule is drawn for the whole '
      f'num_rounds at once); keep num_rounds={run.get("config", {}).get(_ROUNDS_FIELD)}, or pass '
      '--noresume to delete the checkpoints and metrics and start over'
    )

  def record_run(
    self,
    config: Any,
    schedule: Any,
    *,
    checkpointed: bool = True,
    identity: Mapping[str, Any] | None = None,
  ) -> None:
    """Write ``config.json`` (workdir), the fingerprint and the schedule (checkpoints/).

    Call only after :meth:`check_resume` accepted the run. The fingerprint is written
    whether or not this invocation will save checkpoints (``checkpointed`` is kept for
    callers; a run resumed from a checkpoint and continued without saving still
    carries the schedule that a later resume is checked against), so a later run with
    another config into the same workdir is refused either way.
    """
    del checkpointed
    os.makedirs(self.directory, exist_ok=True)
    text = config_json(config, indent=2)
    write_text(os.path.join(self.workdir, 'config.json'), text + '\n')
    run = {
      'format': 1,
      'config': json.loads(text),
      'num_steps': schedule.num_steps,
      'schedule_sha256': schedule_digest(schedule),
      'checkpointed': bool(self.steps()),
      **{k: v for k, v in (identity or {}).items() if k != 'num_steps'},
    }
    write_schedule(self.directory, schedule)
    write_text(os.path.join(self.directory, RUN_FILE), json.dumps(run, sort_keys=True, indent=1))

  # ---- state ------------------------------------------------------------------------
  def save(
    self, step: int, sim_state: Any, host: Mapping[str, Any], meta: Mapping[str, Any] | None = None
  ) -> None:
    """Save a step, wait for orbax to finish it, then write its manifest (with ``meta``:
    ``ring_versions``, the version each ring slot holds; ``metrics_steps``, the steps of
    the evaluation records written so far)."""
    item = {'sim': sim_state, 'host': {k: np.asarray(v) for k, v in host.items()}}

    # A step reached again after a fallback: orbax refuses it (StepAlreadyExistsError).
    def replace_existing() -> int:
      if not os.path.isdir(self.step_dir(step)):
        return 0
      self._move_aside(step, 'is replaced by a new save of that step')
      return 1

    if on_writer(replace_existing, f'save {step}'):  # process 0 moves; all see it moved
      self._reload()
    with _quiet_orbax():
      self.manager.save(step, args=ocp.args.StandardSave(item))
      self.manager.wait_until_finished()
    if jax.process_index() == 0:  # one writer of the shared files (multi-process runs)
      write_manifest(self.step_dir(step), meta)
      run_file = os.path.join(self.directory, RUN_FILE)
      if os.path.isfile(run_file):
        run = read_json(run_file)
        if not run.get('checkpointed'):
          run['checkpointed'] = True
          write_text(run_file, json.dumps(run, sort_keys=True, indent=1))
    barrier(f'afl_jax checkpoint {step}')  # nobody reads the step before its manifest exists

  def restore(
    self,
    step: int,
    sim_template: Any,
    host_template: Mapping[str, Any],
    ring_layout: tuple[ring.RingPlan, np.ndarray] | None = None,
  ) -> tuple[Any, dict[str, np.ndarray]]:
    """Restore a verified step into the templates' structure.

    ``ring_layout``: ``(plan, last_use)`` of the run resumed, given to
    :meth:`prepare_ring` before: the ring slots of the checkpoint are moved to where
    ``plan`` reads them (a longer ``num_rounds`` may plan other slots, or more), and
    ``self.held`` says what each slot then holds. Raises ResumeError when the
    saved arrays' shapes or dtypes differ from the templates', or when a version the
    run reads is not in the checkpoint's ring.
    """
    held, idx = self.resume_held, self.resume_move if ring_layout is not None else None
    if isinstance(idx, int) or (idx is not None and not hasattr(sim_template, 'ring')):
      raise ResumeError(f'the checkpoint at step {step} lacks a broadcast the run reads')
    if idx is not None:
      ring_template = sim_template.ring
      sim_template = sim_template._replace(
        ring=jax.tree.map(lambda r: _resized(r, len(held)), ring_template)
      )
    template = {'sim': sim_template, 'host': {k: np.asarray(v) for k, v in host_template.items()}}
    try:
      have = _saved_spec(self.step_dir(step))
    except (ValueError, TypeError, KeyError, OSError) as e:  # intact bytes, unreadable state
      raise _unrestorable(self.directory, step, e) from e
    # Checked here: orbax restores the saved shapes whatever the template says.
    want = _tree_spec(template)
    if want != have:
      names = sorted(set(want) | set(have))
      bad = next(n for n in names if want.get(n) != have.get(n))
      raise ResumeError(
        f'the checkpoint at step {step} in {self.directory} holds {bad} as '
        f'{_show_spec(have.get(bad))} but this run needs {_show_spec(want.get(bad))}; pass '
        '--noresume to start over'
      )
    abstract = jax.tree.map(_abstract, template)
    try:
      with _quiet_orbax():
        item = self.manager.restore(step, args=ocp.args.StandardRestore(abstract))
    except (ValueError, TypeError, KeyError, OSError) as e:  # intact bytes, unreadable state
      raise _unrestorable(self.directory, step, e) from e
    sim = jax.tree.unflatten(jax.tree.structure(sim_template), jax.tree.leaves(item['sim']))
    if idx is not None:
      self.held = held[idx]
      if len(held) != len(idx) or (idx != np.arange(len(idx))).any():
        moved = jax.tree.map(lambda r, t: _take(r, idx, t), sim.ring, ring_template)
        sim = sim._replace(ring=moved)
    return sim, {k: np.asarray(v) for k, v in item['host'].items()}

  def close(self) -> None:
    self._reload()


def _unrestorable(directory: str, step: int, error: BaseException) -> ResumeError:
  """One line for a verified step that orbax cannot read (the error's first line)."""
  first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
  return ResumeError(
    f'cannot restore the checkpoint at step {step} in {directory} ({first}); pass '
    '--noresume to start over'
  )


def _resized(x: Any, size: int) -> jax.ShapeDtypeStruct:
  """The abstract array ``x`` with ``size`` rows (a checkpoint's ring under another plan)."""
  return jax.ShapeDtypeStruct((size,) + tuple(x.shape[1:]), x.dtype, sharding=x.sharding)


def _take(x: jax.Array, idx: np.ndarray, like: jax.Array) -> jax.Array:
  """Rows ``idx`` of ``x``, placed as ``like`` (the ring of the run's own plan)."""
  return jax.device_put(to_host(x)[idx], like.sharding)


def _abstract(x: Any) -> Any:
  if isinstance(x, jax.ShapeDtypeStruct):
    return x
  if isinstance(x, jax.Array):
    return ocp.utils.to_shape_dtype_struct(x)  # keeps the sharding
  return jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype)


def _show(v: Any) -> str:
  return v if v == _ABSENT else json.dumps(v)


def _show_spec(spec: Any) -> str:
  return 'nothing' if spec is None else f'{spec[1]}{tuple(spec[0])}'
