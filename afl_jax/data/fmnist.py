"""Fashion-MNIST (Xiao, Rasul, Vollgraf 2017) from its four IDX files, plain or gzipped, found as
:func:`~afl_jax.data.base.find_dataset` searches (Debian's ``dataset-fashion-mnist`` included) or
fetched from Zalando's mirror."""

from __future__ import annotations

import os
import pathlib

import numpy as np

from afl_jax.data.base import ArrayDataset, DataError, check_labels, fetch, find_dataset
from afl_jax.data.idx import read_idx

NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28)
SYSTEM_DIR = '/usr/share/datasets/fashion-mnist'
DEFAULT_CACHE_DIR = '~/.cache/afl_jax/fashion-mnist'
SOURCE_URL = 'http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/'
FILES = {
  'train_x': 'train-images-idx3-ubyte',
  'train_y': 'train-labels-idx1-ubyte',
  'test_x': 't10k-images-idx3-ubyte',
  'test_y': 't10k-labels-idx1-ubyte',
}


def find_files(directory: str | os.PathLike) -> dict[str, pathlib.Path] | None:
  """The four files in ``directory`` or its ``fashion-mnist`` subdirectory (uncompressed first);
  None if any is missing."""
  base = pathlib.Path(directory).expanduser()
  for d in (base, base / 'fashion-mnist'):
    found = {}
    for key, stem in FILES.items():
      for name in (stem, stem + '.gz'):
        if (d / name).is_file():
          found[key] = d / name
          break
    if len(found) == len(FILES):
      return found
  return None


def load_split(
  images_path: str | os.PathLike, labels_path: str | os.PathLike
) -> tuple[np.ndarray, np.ndarray]:
  """``(images uint8[n, 28, 28], labels int32[n])`` of one pair, checked to belong together."""
  images = read_idx(images_path, dtype='ubyte', ndim=3)
  labels = read_idx(labels_path, dtype='ubyte', ndim=1)
  if images.shape[1:] != IMAGE_SHAPE:
    raise DataError(f'{images_path}: images have shape {images.shape[1:]}, expected {IMAGE_SHAPE}')
  if images.shape[0] != labels.shape[0]:
    raise DataError(
      f'{images_path} holds {images.shape[0]} images but {labels_path} holds '
      f'{labels.shape[0]} labels; the two files must have the same count'
    )
  check_labels(labels, NUM_CLASSES, labels_path, 'at index')
  return images, labels.astype(np.int32)


def load_fashion_mnist(
  data_dir: str | os.PathLike | None = None,
  *,
  download: bool = False,
  cache_dir: str | os.PathLike | None = None,
  timeout: float = 10.0,
) -> ArrayDataset:
  """Fashion-MNIST's 60,000 train / 10,000 test images as an ``ArrayDataset``."""
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
  train_x, train_y = load_split(files['train_x'], files['train_y'])
  test_x, test_y = load_split(files['test_x'], files['test_y'])
  return ArrayDataset(train_x, train_y, test_x, test_y, NUM_CLASSES)
