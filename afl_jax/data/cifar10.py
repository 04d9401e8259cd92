"""CIFAR-10 from the official binary version (Krizhevsky 2009; the pickled version is never read),
as extracted files or inside ``cifar-10-binary.tar.gz`` read in memory; uint8 NHWC images."""

from __future__ import annotations

import os
import pathlib
import tarfile
import zlib

import numpy as np

from afl_jax.data.base import ArrayDataset, DataError, check_labels, fetch, find_dataset, read_file

NUM_CLASSES, RECORDS_PER_FILE = 10, 10000
RECORD_BYTES = 1 + 32 * 32 * 3  # label byte + channel-major pixels
TRAIN_FILES = tuple(f'data_batch_{i}.bin' for i in range(1, 6))
TEST_FILES = ('test_batch.bin',)
DEFAULT_CACHE_DIR = '~/.cache/afl_jax/cifar-10'
ARCHIVE, ARCHIVE_DIR = 'cifar-10-binary.tar.gz', 'cifar-10-batches-bin'
SOURCE_URL = 'https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz'
_ALL_FILES = TRAIN_FILES + TEST_FILES


def _locate(directory: pathlib.Path) -> dict[str, pathlib.Path] | pathlib.Path | None:
  """The six batch files in ``directory`` or its known subdirectories, else the archive."""
  base = pathlib.Path(directory).expanduser()
  for d in (base, base / ARCHIVE_DIR, base / 'cifar10' / ARCHIVE_DIR):
    present = {n: d / n for n in _ALL_FILES if (d / n).is_file()}
    if len(present) == len(_ALL_FILES):
      return present
    if present:
      missing = [str(d / n) for n in _ALL_FILES if n not in present]
      raise DataError(f'{", ".join(missing)}: file not found (the other five are in {d})')
  return base / ARCHIVE if (base / ARCHIVE).is_file() else None


def parse_batch(data: bytes, name: str, records: int | None) -> tuple[np.ndarray, np.ndarray]:
  """``(images uint8[n, 32, 32, 3], labels int32[n])`` of one batch file."""
  n, rest = divmod(len(data), RECORD_BYTES)
  if n == 0 or rest:
    why = f'{len(data)} bytes is not a whole number of {RECORD_BYTES}-byte records'
    raise DataError(f'{name}: truncated or corrupt file: {why}; delete it and fetch it again')
  if records is not None and n != records:
    raise DataError(f'{name}: holds {n} records, expected {records} (truncated or not CIFAR-10)')
  raw = np.frombuffer(data, np.uint8).reshape(n, RECORD_BYTES)
  labels = raw[:, 0].astype(np.int32)
  hint = ' (is this the CIFAR-100 binary version, or a corrupt file?)'
  check_labels(labels, NUM_CLASSES, name, 'of record', hint)
  images = raw[:, 1:].reshape(n, 3, 32, 32).transpose(0, 2, 3, 1)  # [n, C, H, W] -> NHWC
  return np.ascontiguousarray(images), labels


def _read_archive(path: pathlib.Path) -> dict[str, tuple[str, bytes]]:
  wanted = {f'{ARCHIVE_DIR}/{n}': n for n in _ALL_FILES}
  out = {}
  try:
    with tarfile.open(path, 'r:gz') as tar:
      for member in tar:
        name = wanted.get(member.name.lstrip('./'))
        if name is not None:
          if not member.isfile():
            raise DataError(f'{path}: member {member.name} is not a regular file')
          out[name] = (f'{path}:{ARCHIVE_DIR}/{name}', tar.extractfile(member).read())
  except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
    raise DataError(f'{path}: corrupt or truncated archive ({e}); fetch it again') from e
  missing = [m for m, n in wanted.items() if n not in out]
  if missing:
    raise DataError(f'{path}: lacks {", ".join(missing)}; is it the binary version ({ARCHIVE})?')
  return out


def load_cifar10(
  data_dir: str | os.PathLike | None = None,
  *,
  download: bool = False,
  cache_dir: str | os.PathLike | None = None,
  timeout: float = 30.0,
  records_per_file: int | None = RECORDS_PER_FILE,
) -> ArrayDataset:
  """CIFAR-10's 50,000 train / 10,000 test images; ``records_per_file`` None accepts small
  synthesized files."""
  cache = pathlib.Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()

  def fetch_archive():
    fetch(SOURCE_URL, cache / ARCHIVE, timeout)
    return cache / ARCHIVE

  found = find_dataset(
    data_dir,
    _locate,
    cache=cache,
    download=fetch_archive if download else None,
    url=SOURCE_URL,
    title='CIFAR-10 (binary version)',
    get=f'{ARCHIVE} (the BINARY version, not the python one) from {SOURCE_URL} into a '
    f'directory DIR, optionally extract it there (tar xzf {ARCHIVE} gives '
    f'DIR/{ARCHIVE_DIR}/data_batch_1.bin ... test_batch.bin),',
    loader='load_cifar10',
  )
  if isinstance(found, dict):
    blobs = {n: (str(p), read_file(p)) for n, p in found.items()}
  else:
    blobs = _read_archive(found)

  def split(names):
    parts = [parse_batch(blobs[n][1], blobs[n][0], records_per_file) for n in names]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

  return ArrayDataset(*split(TRAIN_FILES), *split(TEST_FILES), NUM_CLASSES)
