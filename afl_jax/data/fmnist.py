"""Fashion-MNIST (Xiao et al. 2017) from its four IDX files (LeCun and Cortes' format: magic
``0 0 <dtype> <ndim>``, big-endian uint32 sizes, ``prod(dims)`` items), plain or gzipped."""

from __future__ import annotations

import gzip
import math
import os
import pathlib
import zlib

import numpy as np

from afl_jax.data.base import ArrayDataset, DataError, check_labels, fetch, find_dataset, read_file

UBYTE = 0x08  # the IDX dtype code of Fashion-MNIST's four files
NUM_CLASSES, IMAGE_SHAPE = 10, (28, 28)
SYSTEM_DIR = '/usr/share/datasets/fashion-mnist'
DEFAULT_CACHE_DIR = '~/.cache/afl_jax/fashion-mnist'
SOURCE_URL = 'http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/'
FILES = {
  'train_x': 'train-images-idx3-ubyte',
  'train_y': 'train-labels-idx1-ubyte',
  'test_x': 't10k-images-idx3-ubyte',
  'test_y': 't10k-labels-idx1-ubyte',
}


def read_bytes(path: str | os.PathLike) -> bytes:
  raw = read_file(path)
  try:
    return gzip.decompress(raw) if raw[:2] == b'\x1f\x8b' else raw
  except (OSError, EOFError, zlib.error) as e:
    raise DataError(f'{path}: corrupt or truncated gzip data ({e}); fetch it again') from e


def read_idx(path: str | os.PathLike, ndim: int) -> np.ndarray:
  """The uint8 IDX file of ``ndim`` dimensions."""
  data, name = read_bytes(path), os.fspath(path)
  if len(data) < 4:
    raise DataError(f'{name}: file is {len(data)} bytes, too short for the 4-byte IDX magic')
  if data[0] != 0 or data[1] != 0:
    raise DataError(f'{name}: bad IDX magic number 0x{data[:4].hex()} (must start with 0x0000)')
  code, nd = data[2], data[3]
  if code != UBYTE:
    raise DataError(f'{name}: IDX dtype code 0x{code:02X}, expected 0x08 (ubyte)')
  if nd != ndim:
    raise DataError(f'{name}: IDX header declares {nd} dimensions, expected {ndim}')
  header_len = 4 + 4 * nd
  if len(data) < header_len:
    raise DataError(f'{name}: truncated header: {nd} dimensions need {header_len} bytes')
  dims = tuple(int(d) for d in np.frombuffer(data, dtype='>u4', count=nd, offset=4))
  expected, actual = math.prod(dims), len(data) - header_len
  if actual < expected:
    raise DataError(f'{name}: truncated file: {actual} of {expected} bytes of shape {dims}')
  if actual > expected:
    raise DataError(f'{name}: {actual - expected} trailing bytes after the shape {dims}')
  return np.frombuffer(data, dtype=np.uint8, offset=header_len).reshape(dims).copy()


def find_files(directory: str | os.PathLike) -> dict[str, pathlib.Path] | None:
  """The four files in ``directory`` or its ``fashion-mnist`` subdirectory, else None."""
  base = pathlib.Path(directory).expanduser()
  for d in (base, base / 'fashion-mnist'):
    first = lambda stem: next((d / n for n in (stem, stem + '.gz') if (d / n).is_file()), None)
    found = {key: first(stem) for key, stem in FILES.items()}
    if all(found.values()):
      return found
  return None


def load_split(images_path, labels_path) -> tuple[np.ndarray, np.ndarray]:
  """``(images uint8[n, 28, 28], labels int32[n])`` of one pair, checked to belong together."""
  images, labels = read_idx(images_path, 3), read_idx(labels_path, 1)
  if images.shape[1:] != IMAGE_SHAPE:
    raise DataError(f'{images_path}: images have shape {images.shape[1:]}, expected {IMAGE_SHAPE}')
  if images.shape[0] != labels.shape[0]:
    raise DataError(f'{images_path} and {labels_path} do not hold the same count of items')
  check_labels(labels, NUM_CLASSES, labels_path, 'at index')
  return images, labels.astype(np.int32)


def load_fashion_mnist(
  data_dir: str | os.PathLike | None = None,
  *,
  download: bool = False,
  cache_dir: str | os.PathLike | None = None,
  timeout: float = 10.0,
) -> ArrayDataset:
  """Fashion-MNIST, found as :func:`~afl_jax.data.base.find_dataset` searches."""
  cache = pathlib.Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()

  def fetch_all():
    for stem in FILES.values():
      fetch(SOURCE_URL + stem + '.gz', cache / (stem + '.gz'), timeout)
    return find_files(cache)

  files = find_dataset(
    data_dir,
    find_files,
    cache=cache,
    download=fetch_all if download else None,
    url=SOURCE_URL,
    title='Fashion-MNIST',
    get=f'{", ".join(f"{n}.gz" for n in FILES.values())} from {SOURCE_URL} into a directory DIR',
    loader='load_fashion_mnist',
    system_dir=SYSTEM_DIR,
    package='dataset-fashion-mnist',
  )
  train = load_split(files['train_x'], files['train_y'])
  return ArrayDataset(*train, *load_split(files['test_x'], files['test_y']), NUM_CLASSES)
