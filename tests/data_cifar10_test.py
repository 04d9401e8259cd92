"""Tests of the CIFAR-10 binary loader on small files synthesized in the official format.

Each record is written by hand from the format description (1 label byte, then the red,
green and blue 32x32 planes, row-major); the network is never touched.
"""

import io
import os
import tarfile
import urllib.error
import urllib.request

import numpy as np
import pytest

from afl_jax.data import DataError, cifar10, load_cifar10, make_federated

N = 3  # records per synthesized file
NAMES = cifar10.TRAIN_FILES + cifar10.TEST_FILES


def record(label: int, image_hwc: np.ndarray) -> bytes:
  """One record: the label byte, then R, G, B planes (each 32x32, row-major)."""
  planes = b''.join(image_hwc[:, :, c].astype(np.uint8).tobytes() for c in range(3))
  return bytes([label]) + planes


def write_fake(directory, n=N, seed=0, **overrides):
  """Writes the six batch files with ``n`` random records each; returns the arrays."""
  rng = np.random.default_rng(seed)
  os.makedirs(directory, exist_ok=True)
  arrays = {}
  for name in NAMES:
    images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, n)
    data = b''.join(record(int(y), x) for x, y in zip(images, labels))
    with open(os.path.join(directory, name), 'wb') as f:
      f.write(overrides.get(name, data))
    arrays[name] = (images, labels)
  return arrays


def expected(arrays, names):
  return (
    np.concatenate([arrays[n][0] for n in names]),
    np.concatenate([arrays[n][1] for n in names]),
  )


def test_known_pixels_round_trip_with_channel_order(tmp_path):
  # Record 0 of the test batch: red plane = row index, green = column index, blue = 7.
  rows, cols = np.meshgrid(np.arange(32), np.arange(32), indexing='ij')
  image = np.stack([rows, cols, np.full((32, 32), 7)], axis=-1).astype(np.uint8)
  arrays = write_fake(tmp_path)
  raw = record(4, image) + open(tmp_path / 'test_batch.bin', 'rb').read()[cifar10.RECORD_BYTES :]
  (tmp_path / 'test_batch.bin').write_bytes(raw)
  ds = load_cifar10(tmp_path, records_per_file=N)
  assert ds.test_x.shape == (N, 32, 32, 3) and ds.test_x.dtype == np.uint8
  assert ds.test_y[0] == 4 and ds.test_y.dtype == np.int32
  assert ds.test_x[0, 5, 9, 0] == 5  # red = row
  assert ds.test_x[0, 5, 9, 1] == 9  # green = column
  assert ds.test_x[0, 5, 9, 2] == 7  # blue
  # Byte offsets straight from the format: pixel (r, c) of channel k is byte 1 + 1024k + 32r + c.
  assert raw[1 + 0 * 1024 + 32 * 5 + 9] == 5 and raw[1 + 1 * 1024 + 32 * 5 + 9] == 9
  train_x, train_y = expected(arrays, cifar10.TRAIN_FILES)
  np.testing.assert_array_equal(ds.train_x, train_x)  # batches 1..5 in order
  np.testing.assert_array_equal(ds.train_y, train_y)
  assert ds.train_x.shape == (5 * N, 32, 32, 3) and ds.num_classes == 10


def test_make_federated_scales_like_fmnist(tmp_path):
  write_fake(tmp_path, n=20)
  ds = load_cifar10(tmp_path, records_per_file=None)
  fd = make_federated(ds, 'iid', 4, seed=0)
  assert fd.x.shape == (100, 32, 32, 3) and fd.x.dtype == np.float32
  # Scaled to [0, 1] and standardized with the training split's scalar mean and std.
  pixels = ds.train_x.astype(np.float64) / 255.0
  mean, std = pixels.mean(), pixels.std()
  np.testing.assert_allclose(fd.test_x, (ds.test_x / 255.0 - mean) / std, rtol=1e-5, atol=1e-5)


def _tarball(directory, members):
  path = os.path.join(directory, cifar10.ARCHIVE)
  with tarfile.open(path, 'w:gz') as tar:
    for name, data in members.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return path


def test_reads_the_archive_without_extracting(tmp_path):
  src = tmp_path / 'src'
  arrays = write_fake(src)
  members = {f'cifar-10-batches-bin/{n}': (src / n).read_bytes() for n in NAMES}
  members['cifar-10-batches-bin/batches.meta.txt'] = b'airplane\n'
  dest = tmp_path / 'data'
  dest.mkdir()
  _tarball(dest, members)
  ds = load_cifar10(dest, records_per_file=N)
  test_x, test_y = expected(arrays, cifar10.TEST_FILES)
  np.testing.assert_array_equal(ds.test_x, test_x)
  np.testing.assert_array_equal(ds.test_y, test_y)
  assert sorted(os.listdir(dest)) == [cifar10.ARCHIVE]  # nothing written next to it


def test_archive_of_the_python_version_is_refused(tmp_path):
  _tarball(tmp_path, {'cifar-10-batches-py/data_batch_1': b'\x80\x04pickle'})
  with pytest.raises(DataError, match='binary version') as info:
    load_cifar10(tmp_path)
  assert cifar10.ARCHIVE in str(info.value)


def test_truncated_archive_raises_data_error(tmp_path):
  src = tmp_path / 'src'
  write_fake(src)
  path = _tarball(tmp_path, {f'cifar-10-batches-bin/{n}': (src / n).read_bytes() for n in NAMES})
  raw = open(path, 'rb').read()
  open(path, 'wb').write(raw[: len(raw) // 2])
  with pytest.raises(DataError, match='corrupt or truncated archive') as info:
    load_cifar10(tmp_path, records_per_file=N)
  assert cifar10.ARCHIVE in str(info.value)


def _valid(n=N):
  return b''.join(record(1, np.zeros((32, 32, 3), np.uint8)) for _ in range(n))


CORRUPTIONS = {
  'truncated record': ('data_batch_3.bin', _valid()[:-100], N, 'not a whole number'),
  'trailing bytes': ('test_batch.bin', _valid() + b'x', N, 'not a whole number'),
  'empty file': ('data_batch_1.bin', b'', N, 'not a whole number'),
  'one record missing': ('data_batch_5.bin', _valid(N - 1), N, f'expected {N}'),
  'official count': ('data_batch_1.bin', _valid(), 10000, 'expected 10000'),
  'bad label': ('test_batch.bin', _valid(2) + record(10, np.zeros((32, 32, 3))), N, 'label 10'),
}


@pytest.mark.parametrize('case', sorted(CORRUPTIONS))
def test_corrupt_files_raise_data_error_naming_file(tmp_path, case):
  name, data, records, fragment = CORRUPTIONS[case]
  write_fake(tmp_path, **{name: data})
  with pytest.raises(DataError) as info:
    load_cifar10(tmp_path, records_per_file=records)
  msg = str(info.value)
  assert fragment in msg and name in msg
  assert '\n' not in msg  # one clear line


def test_missing_file_is_named(tmp_path):
  write_fake(tmp_path / 'cifar-10-batches-bin')
  os.remove(tmp_path / 'cifar-10-batches-bin' / 'data_batch_4.bin')
  with pytest.raises(DataError, match='data_batch_4.bin: file not found'):
    load_cifar10(tmp_path, records_per_file=N)


def test_missing_dir_gives_instructions(tmp_path):
  missing = tmp_path / 'nowhere'
  with pytest.raises(DataError) as info:
    load_cifar10(missing)
  msg = str(info.value)
  assert str(missing) in msg and cifar10.SOURCE_URL in msg
  assert '--config.data_dir' in msg and 'AFL_JAX_DATA' in msg and 'BINARY' in msg


def test_env_var_and_subdirectory_are_searched(tmp_path, monkeypatch):
  arrays = write_fake(tmp_path / 'cifar-10-batches-bin')
  monkeypatch.setenv('AFL_JAX_DATA', str(tmp_path))
  ds = load_cifar10(records_per_file=N, cache_dir=tmp_path / 'no-cache')
  np.testing.assert_array_equal(ds.test_y, arrays['test_batch.bin'][1])


def test_failed_download_gives_instructions(tmp_path, monkeypatch):
  def fail(url, timeout):
    raise urllib.error.URLError('no network in tests')

  monkeypatch.setattr(urllib.request, 'urlopen', fail)
  with pytest.raises(DataError, match='Download failed') as info:
    load_cifar10(tmp_path / 'none', download=True, cache_dir=tmp_path / 'cache')
  assert cifar10.SOURCE_URL in str(info.value)


def test_download_into_cache_with_fake_server(tmp_path, monkeypatch):
  src = tmp_path / 'src'
  arrays = write_fake(src)
  path = _tarball(tmp_path, {f'cifar-10-batches-bin/{n}': (src / n).read_bytes() for n in NAMES})
  payload = open(path, 'rb').read()
  urls = []

  def fake_urlopen(url, timeout):
    urls.append(url)
    return io.BytesIO(payload)

  monkeypatch.setattr(urllib.request, 'urlopen', fake_urlopen)
  cache = tmp_path / 'cache'
  ds = load_cifar10(tmp_path / 'none', download=True, cache_dir=cache, records_per_file=N)
  np.testing.assert_array_equal(ds.test_x, arrays['test_batch.bin'][0])
  assert urls == [cifar10.SOURCE_URL]
  assert os.listdir(cache) == [cifar10.ARCHIVE]
  load_cifar10(tmp_path / 'none', download=True, cache_dir=cache, records_per_file=N)
  assert len(urls) == 1  # the cached archive is reused
