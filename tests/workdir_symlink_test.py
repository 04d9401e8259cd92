"""Workdirs are never written through a link nor half-written: a planted link is refused in
one line when the workdir is locked (before the config is read), its target untouched."""

import os

import pytest
from helper_runs import one_error_line, run_train

from afl_jax.pipeline import workdir as workdir_lib

SMOKE = ['--config=configs/digits_smoke.py', '--config.num_rounds=4', '--config.eval_every=2']
REJECTED = SMOKE + ['--config.num_clients=0']
RUN = 'client_lr=0.1,seed=0'  # a sweep's run directory
# One name of each kind written in a workdir: lock, file, temporary, a sweep run's file, folder.
FILES = ['.lock', 'summary.json', 'summary.json.tmp', f'{RUN}/metrics.jsonl']
DIRS = ['checkpoints']


def _plant(work, name, outside):
  target = outside / name.replace('/', '_')
  if name in DIRS:
    target.mkdir(parents=True)
    (target / 'precious').write_text('precious')
  else:
    target.write_text('precious')
  link = work / name
  link.parent.mkdir(parents=True, exist_ok=True)
  os.symlink(target, link)
  return link, target


def _state(target):
  if target.is_dir():
    return sorted((p.name, p.read_text(), p.stat().st_mtime_ns) for p in target.iterdir())
  return target.read_text(), target.stat().st_mtime_ns


@pytest.mark.parametrize(
  'name,args', [(n, SMOKE) for n in FILES + DIRS] + [('config.json', REJECTED)]
)
def test_a_planted_link_is_refused_in_one_line_and_its_target_untouched(tmp_path, name, args):
  work, outside = tmp_path / 'work', tmp_path / 'outside'
  outside.mkdir()
  link, target = _plant(work, name, outside)
  before = _state(target)
  rc, out = run_train(work, *args, timeout=120)
  line = one_error_line(rc, out, f'{name} is a symbolic link', 'target is untouched')
  assert [x for x in out.splitlines() if x.strip()] == [line], out
  assert _state(target) == before and os.path.islink(link)
  assert sorted(os.listdir(outside)) == [target.name]  # nothing written beside the target


def test_writes_never_follow_a_link_below_a_held_workdir(tmp_path):
  work, outside = tmp_path / 'work', tmp_path / 'outside'
  outside.mkdir()
  secret = outside / 'secret'
  secret.write_text('precious')
  with workdir_lib.acquire(work):
    # A link at the name: refused, the target untouched.
    os.symlink(secret, work / 'summary.json')
    with pytest.raises(workdir_lib.WorkdirError, match='summary.json is a symbolic link'):
      workdir_lib.write_text(str(work / 'summary.json'), 'new')
    with pytest.raises(workdir_lib.WorkdirError, match='summary.json is a symbolic link'):
      workdir_lib.open_append(str(work / 'summary.json'))
    os.remove(work / 'summary.json')
    # A link at the old temporary name (or any fixed one): never opened.
    os.symlink(secret, work / 'summary.json.tmp')
    workdir_lib.write_text(str(work / 'summary.json'), 'new')
    assert (work / 'summary.json').read_text() == 'new' and not os.path.islink(
      work / 'summary.json'
    )
    os.remove(work / 'summary.json.tmp')
    # A directory on the way that is a link: refused for writes, appends and makedirs.
    os.symlink(outside, work / 'run')
    for write in (
      lambda: workdir_lib.write_text(str(work / 'run' / 'metrics.jsonl'), 'x'),
      lambda: workdir_lib.open_append(str(work / 'run' / 'metrics.jsonl')),
      lambda: workdir_lib.make_dirs(str(work / 'run' / 'tensorboard')),
    ):
      with pytest.raises(workdir_lib.WorkdirError, match='run is a symbolic link'):
        write()
    os.remove(work / 'run')
    # A hard link to an outside file: appending would change it.
    os.link(secret, work / 'metrics.jsonl')
    with pytest.raises(workdir_lib.WorkdirError, match='other hard links'):
      workdir_lib.open_append(str(work / 'metrics.jsonl'))
    os.remove(work / 'metrics.jsonl')
    # A directory where a file is written: one line, not IsADirectoryError.
    (work / 'plot.png').mkdir()
    with pytest.raises(workdir_lib.WorkdirError, match='plot.png is a directory'):
      workdir_lib.write_text(str(work / 'plot.png'), 'x')
  assert secret.read_text() == 'precious' and sorted(os.listdir(outside)) == ['secret']


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
  path = tmp_path / 'summary.json'
  path.write_text('old')

  def half(f):
    f.write(b'half')
    raise OSError(28, 'No space left on device')

  with pytest.raises(OSError):
    workdir_lib.write_text(str(path), half)
  assert path.read_text() == 'old' and os.listdir(tmp_path) == ['summary.json']
  workdir_lib.write_text(str(path), 'new')
  assert path.read_text() == 'new' and os.listdir(tmp_path) == ['summary.json']
  assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~workdir_lib._UMASK)


def test_the_lock_is_never_taken_through_a_link_and_leftovers_are_removed(tmp_path):
  work, secret = tmp_path / 'work', tmp_path / 'secret'
  work.mkdir()
  secret.write_text('precious')
  os.link(secret, work / workdir_lib.LOCK_FILE)  # a hard link: writing the holder changes it
  with pytest.raises(workdir_lib.WorkdirError, match='.lock is a file with other hard links'):
    workdir_lib.acquire(work)
  os.remove(work / workdir_lib.LOCK_FILE)
  os.symlink(secret, work / 'checkpoints')  # a link anywhere inside, before anything is written
  with pytest.raises(workdir_lib.WorkdirError, match='checkpoints is a symbolic link'):
    workdir_lib.acquire(work)
  os.remove(work / 'checkpoints')
  assert secret.read_text() == 'precious'
  # The temporaries of a writer killed mid-write are removed when the workdir is locked.
  (work / 'run').mkdir()
  left = work / 'run' / f'.metrics.jsonl.abc123{workdir_lib.TMP_SUFFIX}'
  left.write_text('torn')
  with workdir_lib.acquire(work):
    assert not left.exists() and (work / 'run').is_dir()
