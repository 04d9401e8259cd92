"""What the dataset readers share."""

from __future__ import annotations

import os
import pathlib
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from afl_jax.errors import UserError

ENV_VAR = 'AFL_JAX_DATA'  # a directory searched for every dataset (after data_dir)


class DataError(UserError):
  """A dataset file is missing, corrupt or inconsistent; the message names the file."""


class ArrayDataset(NamedTuple):
  """``train_x``/``test_x`` ``[n, ...]`` (uint8 images or float32), int32 labels."""

  train_x: np.ndarray
  train_y: np.ndarray
  test_x: np.ndarray
  test_y: np.ndarray
  num_classes: int


def normalizer(train_x: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
  """``f(x) -> float32``: uint8 images scaled to [0, 1] and standardized by the training split's
  scalar pixel mean and std (exact, from the 256-bin histogram); float inputs only cast."""
  if train_x.dtype != np.uint8:
    return lambda x: np.asarray(x, dtype=np.float32)
  counts = np.bincount(train_x.ravel(), minlength=256).astype(np.float64)
  values = np.arange(256) / 255.0
  mean = float(counts @ values / counts.sum())
  std = float(np.sqrt(counts @ (values - mean) ** 2 / counts.sum())) or 1.0
  return lambda x: ((np.asarray(x, np.float32) / 255.0 - mean) / std).astype(np.float32)


def read_file(path: str | os.PathLike) -> bytes:
  try:
    return pathlib.Path(path).read_bytes()
  except FileNotFoundError as e:
    raise DataError(f'{os.fspath(path)}: file not found') from e
  except OSError as e:
    raise DataError(f'{os.fspath(path)}: cannot read file ({e})') from e


def check_labels(labels: np.ndarray, num_classes: int, name: str, at: str, hint: str = ''):
  if labels.size and int(labels.max()) >= num_classes:
    bad = int(np.argmax(labels >= num_classes))
    raise DataError(
      f'{name}: label {int(labels[bad])} {at} {bad} is out of range 0..{num_classes - 1}{hint}'
    )


def fetch(url: str, target: pathlib.Path, timeout: float) -> None:
  if target.is_file():
    return
  target.parent.mkdir(parents=True, exist_ok=True)
  tmp = target.with_name(target.name + '.part')
  with urllib.request.urlopen(url, timeout=timeout) as r:
    tmp.write_bytes(r.read())
  tmp.replace(target)


def find_dataset(
  data_dir: str | os.PathLike | None,
  find: Callable[[pathlib.Path], Any],
  *,
  cache: pathlib.Path,
  download: Callable[[], Any] | None,
  url: str,
  title: str,
  get: str,
  loader: str,
  system_dir: str | None = None,
  package: str | None = None,
) -> Any:
  """What ``find(d)`` locates in the first directory holding the dataset: ``data_dir`` alone if
  given (a typo is an error, not a fallback), else ``$AFL_JAX_DATA``, ``system_dir`` and the
  download ``cache``; then ``download()`` if allowed; else a DataError saying how to get it."""
  if data_dir is not None:
    candidates = [pathlib.Path(data_dir)]
  else:
    candidates = [pathlib.Path(p) for p in (os.environ.get(ENV_VAR), system_dir) if p] + [cache]
  found = next((f for f in map(find, candidates) if f is not None), None)
  if found is not None:
    return found
  searched, reason = [str(d) for d in candidates], ''
  if download is not None:
    try:
      return download()
    except (urllib.error.URLError, OSError, ValueError) as e:
      searched, reason = searched + [url], f' Download failed: {e}.'
  apt = f'  * on Debian/Ubuntu: sudo apt-get install {package} (installs {system_dir}), or\n'
  raise DataError(
    f'{title} not found (searched: {", ".join(searched) or "nothing"}).{reason}\n'
    f'To fix this, either:\n{apt if package else ""}'
    f'  * download {get} and pass --config.data_dir=DIR (or set {ENV_VAR}=DIR), or\n'
    f'  * call {loader}(download=True) on a machine with internet access.'
  )
