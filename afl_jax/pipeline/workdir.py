"""One writer per output directory: an advisory lock, path checks and write failures.

Every writer of a workdir (a single run, :func:`afl_jax.pipeline.loop.train_and_evaluate`;
a sweep, :func:`afl_jax.pipeline.sweep.train_sweep`) holds ``<workdir>/.lock`` for as
long as it writes: an exclusive ``fcntl.flock`` on an open file that names the holder
(pid, host, start time, command). A second writer is refused at once with one line::

  workdir runs/x is in use by pid 1234 on host h (started 2025-01-02 10:00:00: ...)

The kernel drops a flock when its holder dies, however it dies (``kill -9`` included),
so a workdir whose holder is gone is simply taken over; the stale holder text left in
the file is rewritten by the new holder and never read as a live one (only a failed
flock reads it). The lock file is removed on release, and a directory that the lock
created is removed again if nothing was written into it (a refused config leaves
nothing behind). A process that already holds a workdir's lock (``scripts/train.py``
takes it before importing JAX, so a busy workdir is refused in well under a second)
may acquire it again: the inner acquisition is a no-op.

This module uses the standard library only, so a script can load it before JAX.
It also checks a workdir path before anything is computed (:func:`check_path`),
refuses a workdir holding the other kind of run (:func:`refuse_other`) and turns a
failed write (full or read-only disk) into one line (:func:`write_error`).

It is the one place where afl_jax writes a file (orbax writes its own items, atomically):
:func:`atomic_file` (and :func:`write_text`, :func:`write_bytes`, :func:`write_with`
for an .npz or a .png) creates a temporary file exclusively beside the target
(``tempfile.mkstemp``: O_CREAT | O_EXCL | O_NOFOLLOW, a random name, so no planted name
is ever opened), syncs it and renames it into place: a reader sees the old file or the
new one, never half of one. :func:`open_append` (metrics.jsonl) opens with O_NOFOLLOW
and refuses anything but a regular file with one link. No link is followed: a target
that is a symbolic link, and below a held workdir any directory on the way that is one,
is refused with one line naming it (:func:`check_target`). When a workdir is locked, a
symbolic link anywhere inside it is refused before anything is read or written, and the
temporary files of a writer killed mid-write are removed. The lock file itself is opened
with O_NOFOLLOW and must be a regular file with one link; it is written in place (its
inode is what the flock holds, so it cannot be replaced by a rename).

Why none of it is left to orbax: orbax's ``CheckpointManager`` "is NOT multi-job-safe"
(its docstring, orbax-checkpoint 0.12.8: two jobs saving into one directory are not
detected), it guards only ``checkpoints/`` while the lock guards every output of the
workdir, and the lock must be taken before JAX (hence orbax) is imported.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import errno
import fcntl
import json
import os
import signal
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

if __name__.startswith('afl_jax.'):  # a UserError ends a script as one line
  from afl_jax.errors import UserError as _Base
else:  # loaded by path before afl_jax (and JAX) is imported: scripts/train.py
  _Base = ValueError

__all__ = [
  'LOCK_FILE',
  'SCHEDULE_FILE',
  'SWEEP_FILE',
  'TMP_SUFFIX',
  'Interrupted',
  'WorkdirBusyError',
  'WorkdirError',
  'WorkdirLock',
  'acquire',
  'atomic_file',
  'check_dir',
  'check_path',
  'check_target',
  'ctrl_c_after',
  'disk_error',
  'find_link',
  'flag_value',
  'holder',
  'lock_from_argv',
  'make_dirs',
  'open_append',
  'read_json',
  'refuse_other',
  'show',
  'write_bytes',
  'write_error',
  'write_schedule',
  'write_text',
  'write_with',
]

LOCK_FILE = '.lock'
# Write failures that are the disk's or the filesystem's, not the program's.
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM)


class WorkdirError(_Base):
  """A workdir that cannot be written: not a directory, not writable, full."""


class WorkdirBusyError(WorkdirError):
  """A workdir another live process is writing."""


SWEEP_FILE = 'sweep.json'  # a sweep's config and whether every run of it finished
# The files that show what a workdir holds: a single run's and a sweep's.
KIND_FILES = {
  'single run': ('config.json', os.path.join('checkpoints', 'run.json')),
  'sweep': (SWEEP_FILE,),
}


def refuse_other(workdir: str | os.PathLike, kind: str) -> None:
  """WorkdirError when ``workdir`` holds the other kind of run (``kind``: a KIND_FILES key),
  whose summary.json and plot.png a run of ``kind`` would overwrite."""
  for other, names in KIND_FILES.items():
    for name in names if other != kind else ():
      if os.path.isfile(os.path.join(os.fspath(workdir), name)):
        raise WorkdirError(
          f'workdir {show(os.path.abspath(workdir))} holds a {other} ({name}); a {kind} would '
          'overwrite its summary.json and plot.png; choose another --workdir'
        )


# ---- writing without following links ----------------------------------------------------
# The workdirs this process holds (acquire adds, release removes): below one of them no
# directory on the way to a written file may be a symbolic link.
_ROOTS: list[str] = []
TMP_SUFFIX = '.afl-tmp'  # temporary files of atomic writes (removed when a workdir is locked)
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class Interrupted(KeyboardInterrupt):
  """Ctrl-C (SIGINT), with one line saying what was kept and how to continue."""


@contextlib.contextmanager
def ctrl_c_after() -> Iterator[None]:
  """Hold a Ctrl-C (SIGINT) that arrives inside the block until the block has finished
  (e.g. a checkpoint being saved), then raise it. Other threads: no effect."""
  if threading.current_thread() is not threading.main_thread() or (
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler
  ):  # another thread, or SIGINT ignored or handled by the caller: left as it is
    yield
    return
  caught = []
  old = signal.signal(signal.SIGINT, lambda *args: caught.append(args))
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, old)
  if caught:
    raise KeyboardInterrupt


def _link_error(path: str) -> WorkdirError:
  try:
    target = os.readlink(path)
  except OSError:
    target = '?'
  return WorkdirError(
    f'{show(path)} is a symbolic link (to {target}); afl_jax writes no file through a link: '
    'remove it (its target is untouched) or choose another --workdir'
  )


def check_target(path: str) -> str:
  """``path`` (absolute) when a file may be written there, else WorkdirError (one line).

  Refused: ``path`` itself a symbolic link or a directory, and, below a workdir this
  process holds, any directory on the way to it that is a symbolic link.
  """
  path = os.path.abspath(os.fspath(path))
  root = next((r for r in _ROOTS if path.startswith(r.rstrip(os.sep) + os.sep)), None)
  if root is not None:
    d = root
    for part in os.path.relpath(os.path.dirname(path), root).split(os.sep):
      if part in ('', '.'):
        continue
      d = os.path.join(d, part)
      if os.path.islink(d):
        raise _link_error(d)
  if os.path.islink(path):
    raise _link_error(path)
  if os.path.isdir(path):
    raise WorkdirError(
      f'{show(path)} is a directory, not a file; move it away or choose another --workdir'
    )
  return path


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = 'w') -> Iterator[IO[Any]]:
  """A new file that replaces ``path`` when the block ends without an error.

  The file is created exclusively beside ``path`` (``tempfile.mkstemp``: O_CREAT |
  O_EXCL | O_NOFOLLOW, a fresh random name, so a planted link is never opened), synced,
  given the permissions the umask allows and renamed over ``path``; on an error it is
  removed and ``path`` keeps its old content. No link is followed (:func:`check_target`).
  """
  path = check_target(os.fspath(path))
  d, name = os.path.split(path)
  fd, tmp = tempfile.mkstemp(prefix=f'.{name}.', suffix=TMP_SUFFIX, dir=d)
  try:
    os.fchmod(fd, 0o666 & ~_UMASK)
    with os.fdopen(fd, mode) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    check_target(path)  # a link planted meanwhile is refused, not replaced
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.unlink(tmp)
    raise


def write_text(path: str | os.PathLike, text: str) -> None:
  """Write ``text`` to ``path`` atomically (:func:`atomic_file`)."""
  with atomic_file(path, 'w') as f:
    f.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
  """Write ``data`` to ``path`` atomically (:func:`atomic_file`)."""
  with atomic_file(path, 'wb') as f:
    f.write(data)


def write_with(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
  """``write(f)`` into a binary file that atomically becomes ``path`` (an .npz, a .png)."""
  with atomic_file(path, 'wb') as f:
    write(f)


SCHEDULE_FILE = 'schedule.npz'  # a run folder's schedule (single run and each run of a sweep)


def write_schedule(run_dir: str | os.PathLike, schedule: Any) -> None:
  """``schedule`` (an :class:`afl_jax.schedules.Schedule`) as ``<run_dir>/schedule.npz``,
  atomically (:meth:`Schedule.save`: plain arrays, no pickles). ``afl_jax.schedules.load``
  reads it back and the ``trace`` schedule kind replays it (afl_jax/schedules/traces.py)."""
  write_with(os.path.join(os.fspath(run_dir), SCHEDULE_FILE), schedule.save)


def open_append(path: str | os.PathLike) -> IO[str]:
  """``path`` opened for appending text (created if missing), never through a link.

  Refused (WorkdirError): a link (O_NOFOLLOW), a directory, anything but a regular
  file, and a file with other hard links (appending would change them too).
  """
  path = check_target(os.fspath(path))
  try:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
  except OSError as e:
    if e.errno == errno.ELOOP:
      raise _link_error(path) from None
    raise
  st = os.fstat(fd)
  if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
    os.close(fd)
    why = 'not a regular file' if not stat.S_ISREG(st.st_mode) else 'a file with other hard links'
    raise WorkdirError(
      f'{show(path)} is {why}; afl_jax appends only to its own files: move it away'
    )
  return os.fdopen(fd, 'a')


def check_dir(path: str | os.PathLike) -> str:
  """``path`` (absolute) when it is, or can be made, a directory without following a link
  (:func:`check_target`'s checks of the way) nor replacing a file; else WorkdirError."""
  path = os.path.abspath(os.fspath(path))
  check_target(os.path.join(path, '_'))  # every directory on the way, ``path`` included
  d = path
  while not os.path.isdir(d) and d != os.path.dirname(d):
    if os.path.lexists(d):
      raise WorkdirError(
        f'{show(d)} is a file, not a directory; move it away or choose another --workdir'
      )
    d = os.path.dirname(d)
  return path


def make_dirs(path: str | os.PathLike) -> str:
  """``os.makedirs(path, exist_ok=True)`` after :func:`check_dir`."""
  path = check_dir(path)
  os.makedirs(path, exist_ok=True)
  return path


def find_link(workdir: str | os.PathLike) -> str | None:
  """The first symbolic link inside ``workdir`` (files and directories, links not followed)."""
  for root, dirs, files in os.walk(os.fspath(workdir)):
    for name in sorted(dirs) + sorted(files):
      if os.path.islink(os.path.join(root, name)):
        return os.path.join(root, name)
  return None


def _tidy(workdir: str) -> None:
  """Refuse a workdir holding a link (one line, before anything is written); remove the
  temporary files of atomic writes an earlier holder left when it was killed."""
  link = find_link(workdir)
  if link is not None:
    raise _link_error(link)
  for root, _, files in os.walk(workdir):
    for name in files:
      if name.startswith('.') and name.endswith(TMP_SUFFIX):
        with contextlib.suppress(OSError):
          os.unlink(os.path.join(root, name))


def read_json(path: str, *, strict: bool = True) -> Any:
  """The JSON value in ``path``; ``strict=False``: None when it is missing or unreadable."""
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    if strict:
      raise
    return None


def show(path: str) -> str:
  """``path`` relative to the current directory when under it, else as given."""
  return os.path.relpath(path) if not os.path.relpath(path).startswith('..') else path


def check_path(workdir: str | os.PathLike | None, flag: str = '--workdir') -> str:
  """The absolute workdir path, or WorkdirError (one line) when it cannot be one.

  Refused: an empty path, an existing file, a path under a file, and a directory
  (or its nearest existing parent) that this process may not write.
  """
  text = '' if workdir is None else os.fspath(workdir)
  if not text.strip():
    raise WorkdirError(f'{flag}={text!r} is invalid: give the output directory to write into')
  path = os.path.abspath(os.path.expanduser(text))
  if os.path.exists(path) and not os.path.isdir(path):
    raise WorkdirError(
      f'{flag}={text} is invalid: it is an existing file, not a directory; choose another'
    )
  parent = path
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise WorkdirError(f'{flag}={text} is invalid: {parent} is a file, not a directory')
  if not os.access(parent, os.W_OK | os.X_OK):
    raise WorkdirError(f'{flag}={text} is invalid: {parent} is not writable by this user')
  return path


def _makedirs(path: str) -> list[str]:
  """Create ``path`` and missing parents; returns the directories created, outermost first."""
  missing = []
  p = path
  while not os.path.isdir(p):
    missing.append(p)
    p = os.path.dirname(p)
  for d in reversed(missing):
    try:
      os.mkdir(d)
    except FileExistsError:
      if not os.path.isdir(d):
        raise
  return list(reversed(missing))


def _describe() -> dict[str, Any]:
  argv = ' '.join(sys.argv) if sys.argv and sys.argv[0] else 'python'
  return {
    'pid': os.getpid(),
    'host': socket.gethostname(),
    'started': datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S'),
    'command': argv[:300],
  }


def holder(workdir: str | os.PathLike) -> dict[str, Any] | None:
  """What the lock file says about its holder (None: unreadable or empty)."""
  try:
    with open(os.path.join(os.fspath(workdir), LOCK_FILE)) as f:
      info = json.loads(f.read() or 'null')
  except (OSError, ValueError):
    return None
  return info if isinstance(info, dict) else None


def _is_me(info: dict[str, Any] | None) -> bool:
  return bool(info) and info.get('pid') == os.getpid() and info.get('host') == socket.gethostname()


class WorkdirLock:
  """A held workdir lock (see the module docstring); ``release()`` or use ``with``.

  ``owner`` is False for an inner acquisition by a process that already holds it.
  """

  def __init__(self, path: str, fd: int | None, created: Sequence[str] = ()):
    self.path = path
    self._fd = fd
    self._created = list(created)
    self._held = True
    _ROOTS.append(path)  # writes below it follow no link (check_target)

  @property
  def owner(self) -> bool:
    return self._fd is not None

  def release(self) -> None:
    """Drop the lock, remove the lock file and the directories it created, if left empty."""
    if self._held:
      self._held = False
      _ROOTS.remove(self.path)
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    try:
      os.unlink(os.path.join(self.path, LOCK_FILE))  # still held: no one can be fooled
    except OSError:
      pass
    os.close(fd)
    _rmdirs(self._created)

  def __enter__(self) -> WorkdirLock:
    return self

  def __exit__(self, *exc: Any) -> None:
    self.release()


def _busy_message(path: str, info: dict[str, Any] | None) -> str:
  if not info:
    who = 'another process (it is starting)'
  else:
    who = f'pid {info.get("pid")} on host {info.get("host")} (started {info.get("started")}'
    who += f': {info["command"]})' if info.get('command') else ')'
  return (
    f'workdir {show(path)} is in use by {who}; wait for it to finish, stop it, or choose '
    'another --workdir'
  )


def acquire(workdir: str | os.PathLike, flag: str = '--workdir') -> WorkdirLock:
  """Create ``workdir`` if needed and lock it for this process; refuses a busy one.

  Raises:
    WorkdirError: the path cannot be a writable directory (:func:`check_path`).
    WorkdirBusyError: another live process holds the lock (named in the message).
  """
  path = check_path(workdir, flag)
  try:
    created = _makedirs(path)
  except OSError as e:
    raise WorkdirError(f'{flag}={os.fspath(workdir)} is invalid: cannot create it ({e})') from None
  lock_path = os.path.join(path, LOCK_FILE)
  for _ in range(10):  # the file may be replaced between open and flock (a release)
    try:
      fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as e:
      _rmdirs(created)
      if e.errno == errno.ELOOP:  # a planted link: its target is never opened
        raise _link_error(lock_path) from None
      raise WorkdirError(f'workdir {show(path)} is not writable ({e})') from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # writing the holder would change it
      os.close(fd)
      why = 'not a regular file' if not stat.S_ISREG(st.st_mode) else 'a file with other hard links'
      raise WorkdirError(f'{show(lock_path)} is {why}; remove it or choose another --workdir')
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      info = holder(path)
      if _is_me(info):
        _tidy(path)
        return WorkdirLock(path, None)  # this process holds it already
      raise WorkdirBusyError(_busy_message(path, info)) from None
    try:
      same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
    except FileNotFoundError:
      same = False
    if not same:  # released and unlinked meanwhile: lock the new file instead
      os.close(fd)
      continue
    lock = WorkdirLock(path, fd, created)
    try:
      _tidy(path)  # held: no other afl_jax writer is in the workdir
      text = json.dumps(_describe())
      os.ftruncate(fd, 0)
      os.pwrite(fd, text.encode(), 0)
    except WorkdirError:
      lock.release()
      raise
    except OSError as e:
      lock.release()
      raise WorkdirError(f'workdir {show(path)} is not writable ({e})') from None
    return lock
  raise WorkdirBusyError(_busy_message(path, holder(path)))


def _rmdirs(created: Sequence[str]) -> None:
  """Remove directories this process created, innermost first, while they are empty."""
  for d in reversed(created):
    try:
      os.rmdir(d)  # only if empty: outputs are never removed
    except OSError:
      break


def flag_value(argv: Sequence[str], name: str) -> str | None:
  """The last value of ``--name`` (or absl's ``-name``) in ``argv``, as absl reads it."""
  value = None
  for i, arg in enumerate(argv):
    if arg == '--':
      break
    for flag in (f'--{name}', f'-{name}'):
      if arg.startswith(f'{flag}='):
        value = arg.split('=', 1)[1]
      elif arg == flag and i + 1 < len(argv):
        value = argv[i + 1]
  return value


def lock_from_argv(argv: Sequence[str], default: str) -> WorkdirLock | None:
  """For scripts: lock ``--workdir`` (or ``default``) from the raw command line, or exit.

  Called before the script imports JAX, so a busy workdir is refused at once. A bad
  path or a busy workdir ends the process with one ``error:`` line (status 1). Not
  taken (None) for ``--help``-style calls or a multi-process run (``--num_processes`` >
  1 or ``--coordinator``: process 0 takes it in the library). Released at exit.
  """
  if any(a.startswith(('--help', '-h', '--helpshort', '--helpfull')) for a in argv[1:]):
    return None
  procs = flag_value(argv, 'num_processes')
  if flag_value(argv, 'coordinator') or (procs not in (None, '1')):
    return None
  workdir = flag_value(argv, 'workdir')
  try:
    lock = acquire(default if workdir is None else workdir)
  except WorkdirError as e:
    sys.exit(f'error: {e}')
  atexit.register(lock.release)
  return lock


def disk_error(error: BaseException, workdir: str | os.PathLike | None = None) -> OSError | None:
  """The OSError behind ``error`` (itself or a cause) when it is the disk's (full, read-only).

  A permission error counts only for a file under ``workdir`` (when given).
  """
  root = os.path.abspath(os.fspath(workdir)) + os.sep if workdir is not None else None
  seen = set()
  e: BaseException | None = error
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
      if e.errno not in (errno.EACCES, errno.EPERM) or root is None:
        return e
      name = e.filename if isinstance(e.filename, str) else ''
      if name and os.path.abspath(name).startswith(root):
        return e
    e = e.__cause__ or e.__context__
  return None


def write_error(workdir: str | os.PathLike, error: OSError, doing: str, kept: str) -> WorkdirError:
  """One line for a failed write: what failed, why, and what was kept."""
  why = os.strerror(error.errno) if error.errno else str(error)
  return WorkdirError(
    f'cannot write to workdir {show(os.path.abspath(os.fspath(workdir)))} while {doing}: '
    f'{why} [errno {error.errno}]; {kept}'
  )
