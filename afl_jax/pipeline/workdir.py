"""One writer per directory (:func:`acquire`), atomic writes (:func:`write_files`); docs/
reliability.md, "Workdir files". Standard library only: scripts/train.py loads it first."""

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
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any

if __name__.startswith('afl_jax.'):
  from afl_jax.errors import UserError as _Base
else:  # loaded by path before afl_jax (and JAX) is imported
  _Base = ValueError

LOCK_FILE = '.lock'
SCHEDULE_FILE = 'schedule.npz'
TMP_SUFFIX = '.afl-tmp'
# Write failures that are the disk's or the filesystem's, not the program's.
DISK_ERRNOS = tuple(getattr(errno, n) for n in 'ENOSPC EDQUOT EFBIG EROFS EIO EACCES EPERM'.split())
_ROOTS: list[str] = []  # the directories this process holds: no link followed below them
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class WorkdirError(_Base):
  """A workdir that cannot be written: not a directory, not writable, full, a link."""


class WorkdirBusyError(WorkdirError):
  """A workdir another live process is writing."""


class Interrupted(KeyboardInterrupt):
  """Ctrl-C, with one line saying what was kept and how to continue."""


@contextlib.contextmanager
def ctrl_c_after() -> Iterator[None]:
  """Hold a Ctrl-C arriving inside the block (a checkpoint being saved) until it ends."""
  if threading.current_thread() is not threading.main_thread() or (
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler
  ):
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


def show(path: str) -> str:
  rel = os.path.relpath(path)
  return path if rel.startswith('..') else rel


def _link_error(path: str) -> WorkdirError:
  try:
    target = os.readlink(path)
  except OSError:
    target = '?'
  return WorkdirError(
    f'{show(path)} is a symbolic link (to {target}); afl_jax writes no file through a link: '
    'remove it (its target is untouched) or choose another --workdir'
  )


def check_target(path: str | os.PathLike) -> str:
  """``path`` (absolute) when a file may be written there (not a link nor a directory, no link
  on the way below a held workdir), else WorkdirError."""
  path = os.path.abspath(os.fspath(path))
  root = next((r for r in _ROOTS if path.startswith(r.rstrip(os.sep) + os.sep)), None)
  d = root
  for part in os.path.relpath(os.path.dirname(path), root).split(os.sep) if root else ():
    d = os.path.join(d, part) if part not in ('', '.') else d
    if os.path.islink(d):
      raise _link_error(d)
  if os.path.islink(path):
    raise _link_error(path)
  if os.path.isdir(path):
    raise WorkdirError(
      f'{show(path)} is a directory, not a file; move it away or choose another --workdir'
    )
  return path


def write_files(
  files: Mapping[str | os.PathLike, str | bytes | Callable[[IO[bytes]], Any]],
) -> None:
  """Write each file (text, bytes, or ``write(f)``) to a synced temporary beside it, then rename
  each into place: a failure before the renames leaves every old file."""
  temps = []
  try:
    for path, content in files.items():
      path = check_target(path)
      d, name = os.path.split(path)
      fd, tmp = tempfile.mkstemp(prefix=f'.{name}.', suffix=TMP_SUFFIX, dir=d)
      temps.append((tmp, path))
      os.fchmod(fd, 0o666 & ~_UMASK)
      with os.fdopen(fd, 'wb') as f:
        if callable(content):
          content(f)
        else:
          f.write(content.encode() if isinstance(content, str) else content)
        f.flush()
        os.fsync(f.fileno())
    for tmp, path in temps:
      check_target(path)  # a link planted meanwhile is refused, not replaced
      os.replace(tmp, path)
  except BaseException as e:
    for tmp, _ in temps:
      with contextlib.suppress(OSError):
        os.unlink(tmp)
    if isinstance(e, OSError) and not e.filename and temps:
      e.filename = temps[-1][1]  # a failed write names the file it was writing
    raise


def write_text(path: str | os.PathLike, text: str | Callable[[IO[bytes]], Any]) -> None:
  write_files({path: text})


def write_schedule(run_dir: str | os.PathLike, schedule: Any) -> None:
  write_text(os.path.join(os.fspath(run_dir), SCHEDULE_FILE), schedule.save)


def _open_own(path: str, flags: int, mode: int, advice: str) -> int:
  """``path`` opened (created if missing), never a link, a special file or one with other hard
  links (a write would change them)."""
  try:
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
  except OSError as e:
    if e.errno == errno.ELOOP:
      raise _link_error(path) from None
    raise
  st = os.fstat(fd)
  if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
    os.close(fd)
    why = 'not a regular file' if not stat.S_ISREG(st.st_mode) else 'a file with other hard links'
    raise WorkdirError(f'{show(path)} is {why}; {advice}')
  return fd


def open_append(path: str | os.PathLike) -> IO[str]:
  path, advice = check_target(path), 'afl_jax appends only to its own files: move it away'
  return os.fdopen(_open_own(path, os.O_WRONLY | os.O_APPEND, 0o666, advice), 'a')


def make_dirs(path: str | os.PathLike) -> str:
  """``path`` made a directory, following no link nor replacing a file."""
  path = os.path.abspath(os.fspath(path))
  check_target(os.path.join(path, '_'))
  d = path
  while not os.path.isdir(d) and d != os.path.dirname(d):
    if os.path.lexists(d):
      raise WorkdirError(
        f'{show(d)} is a file, not a directory; move it away or choose another --workdir'
      )
    d = os.path.dirname(d)
  os.makedirs(path, exist_ok=True)
  return path


def read_json(path: str, *, strict: bool = True) -> Any:
  """The JSON value in ``path``; ``strict=False``: None when missing or unreadable."""
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    if strict:
      raise
    return None


def check_path(workdir: str | os.PathLike | None, flag: str = '--workdir') -> str:
  """The absolute workdir path, or WorkdirError when it cannot be one."""
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


def _tidy(workdir: str) -> None:
  """Refuse a directory holding a link or a folder another live process writes; remove the
  temporary files a killed writer left."""
  for root, dirs, files in os.walk(workdir):
    for name in sorted(dirs) + sorted(files):
      path = os.path.join(root, name)
      if os.path.islink(path):
        raise _link_error(path)
      if name.startswith('.') and name.endswith(TMP_SUFFIX):
        with contextlib.suppress(OSError):
          os.unlink(path)
      if name == LOCK_FILE and root != workdir and (info := _live_holder(root)) is not None:
        raise _busy(workdir, info, f'holds {show(root)}, which is in use by')


def _live_holder(directory: str) -> dict[str, Any] | None:
  """The holder of ``directory``'s lock when another live process ({}: not written yet)."""
  try:
    fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
  except OSError:
    return None
  try:
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # dropped when closed, below
  except BlockingIOError:
    info = holder(directory) or {}
    return None if _mine(info) else info
  finally:
    os.close(fd)
  return None


def _enclosing_writer(path: str) -> tuple[str, dict[str, Any]] | None:
  """(directory, holder) of a directory above ``path`` another live process writes."""
  d = os.path.dirname(path)
  while (info := _live_holder(d)) is None:
    if os.path.dirname(d) == d:
      return None
    d = os.path.dirname(d)
  return d, info


def holder(workdir: str | os.PathLike) -> dict[str, Any] | None:
  info = read_json(os.path.join(os.fspath(workdir), LOCK_FILE), strict=False)
  return info if isinstance(info, dict) else None


def _mine(info: dict[str, Any] | None) -> bool:
  return bool(info) and info.get('pid') == os.getpid() and info.get('host') == socket.gethostname()


class WorkdirLock(contextlib.AbstractContextManager):
  """A held lock (``fd`` None: an inner acquisition by the holder); ``release()`` drops it and
  removes the directories it created if empty."""

  def __init__(self, path: str, fd: int | None, created: Sequence[str] = ()):
    self.path, self._fd, self._created, self._held = path, fd, list(created), True
    _ROOTS.append(path)

  @property
  def owner(self) -> bool:
    """False for an inner acquisition by the holder (it releases nothing)."""
    return self._fd is not None

  def release(self) -> None:
    if self._held:
      self._held = False
      _ROOTS.remove(self.path)
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    with contextlib.suppress(OSError):
      os.unlink(os.path.join(self.path, LOCK_FILE))  # still held: no one can be fooled
    os.close(fd)
    for d in reversed(self._created):
      try:
        os.rmdir(d)  # only if empty: outputs are never removed
      except OSError:
        break

  def __exit__(self, *exc: Any) -> None:
    self.release()


def _busy(path: str, info: dict[str, Any] | None, how: str = 'is in use by') -> WorkdirBusyError:
  who = 'another process (it is starting)'
  if info:
    who = f'pid {info.get("pid")} on host {info.get("host")} (started {info.get("started")}'
    who += f': {info["command"]})' if info.get('command') else ')'
  return WorkdirBusyError(
    f'workdir {show(path)} {how} {who}; wait for it to finish, stop it, or choose another --workdir'
  )


def _flock(fd: int, tries: int = 5) -> None:
  """An exclusive lock on ``fd``, tried a few times (another writer's probe lasts microseconds)."""
  for i in range(tries):
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      return
    except BlockingIOError:
      if i == tries - 1:
        raise
      time.sleep(0.01)


def acquire(workdir: str | os.PathLike, flag: str = '--workdir') -> WorkdirLock:
  """Create ``workdir`` if needed and lock it; WorkdirError (WorkdirBusyError: another live
  holder, named) otherwise."""
  path = check_path(workdir, flag)
  created, p = [], path
  while not os.path.isdir(p):
    created.insert(0, p)
    p = os.path.dirname(p)
  try:
    for d in created:
      os.makedirs(d, exist_ok=True)
  except OSError as e:
    raise WorkdirError(f'{flag}={os.fspath(workdir)} is invalid: cannot create it ({e})') from None
  lock_path = os.path.join(path, LOCK_FILE)
  for _ in range(10):  # the file may be replaced between open and flock (a release)
    try:
      fd = _open_own(lock_path, os.O_RDWR, 0o644, 'remove it or choose another --workdir')
    except OSError as e:
      for d in reversed(created):  # what acquire created, nothing else
        with contextlib.suppress(OSError):
          os.rmdir(d)
      raise WorkdirError(f'workdir {show(path)} is not writable ({e})') from None
    try:
      _flock(fd)
    except BlockingIOError:
      os.close(fd)
      info = holder(path)
      if _mine(info):
        return WorkdirLock(path, None)  # this process holds it already
      raise _busy(path, info) from None
    try:
      same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
    except FileNotFoundError:
      same = False
    if not same:  # released and unlinked meanwhile: lock the new file instead
      os.close(fd)
      continue
    lock = WorkdirLock(path, fd, created)
    try:
      outer = _enclosing_writer(path)  # after taking ours: of two racing writers one sees the other
      if outer is not None:
        raise _busy(path, outer[1], f'is inside {show(outer[0])}, which is in use by')
      _tidy(path)
      argv = ' '.join(sys.argv) if sys.argv and sys.argv[0] else 'python'
      now = datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')
      info = {'pid': os.getpid(), 'host': socket.gethostname(), 'started': now}
      info['command'] = argv[:300]
      os.ftruncate(fd, 0)
      os.pwrite(fd, json.dumps(info).encode(), 0)
    except WorkdirError:
      lock.release()
      raise
    except OSError as e:
      lock.release()
      raise WorkdirError(f'workdir {show(path)} is not writable ({e})') from None
    return lock
  raise _busy(path, holder(path))


def flag_value(argv: Sequence[str], name: str) -> str | None:
  """The last value of ``--name`` (or ``-name``) in ``argv``, as absl reads it."""
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
  """Lock ``--workdir`` (or ``default``) before JAX is imported, or exit with one line; not for
  ``--help`` or a multi-process run (process 0 locks it in the library)."""
  if any(a.startswith(('--help', '-h', '--helpshort', '--helpfull')) for a in argv[1:]):
    return None
  procs = flag_value(argv, 'num_processes')
  if flag_value(argv, 'coordinator') or procs not in (None, '1'):
    return None
  workdir = flag_value(argv, 'workdir')
  try:
    lock = acquire(default if workdir is None else workdir)
  except WorkdirError as e:
    sys.exit(f'error: {e}')
  atexit.register(lock.release)
  return lock


def disk_error(error: BaseException, workdir: str | os.PathLike | None = None) -> OSError | None:
  """The disk's OSError behind ``error``; a permission error only for a file under ``workdir``."""
  root = os.path.abspath(os.fspath(workdir)) + os.sep if workdir is not None else None
  e, seen = error, set()
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
      name = e.filename if isinstance(e.filename, str) else ''
      if e.errno not in (errno.EACCES, errno.EPERM) or root is None:
        return e
      if name and os.path.abspath(name).startswith(root):
        return e
    e = e.__cause__ or e.__context__
  return None


def write_error(workdir: str | os.PathLike, error: OSError, doing: str, kept: str) -> WorkdirError:
  """One line for a failed write: the file, what was being written, why, what was kept."""
  why = os.strerror(error.errno) if error.errno else str(error)
  name = error.filename if isinstance(error.filename, str) else ''
  where = f'{show(os.path.abspath(name))}' if name else f'workdir {show(os.path.abspath(workdir))}'
  return WorkdirError(f'cannot write {where} while {doing}: {why} [errno {error.errno}]; {kept}')
