"""CIFAR-10 batches and Fashion-MNIST IDX files written by hand from their formats (no network):
every corruption one DataError naming the file; the search and its instructions."""

import gzip
import io
import os
import struct
import tarfile
import urllib.error
import urllib.request

import numpy as np
import pytest

from afl_jax.data import (
  DataError,
  cifar10,
  fmnist,
  load_cifar10,
  load_fashion_mnist,
  make_federated,
)

N = 3  # records per synthesized CIFAR-10 file
NAMES = cifar10.TRAIN_FILES + cifar10.TEST_FILES
SYSTEM_DIR = '/usr/share/datasets/fashion-mnist'


def record(label: int, image_hwc: np.ndarray) -> bytes:
  """One record: the label byte, then R, G, B planes (each 32x32, row-major)."""
  planes = b''.join(image_hwc[:, :, c].astype(np.uint8).tobytes() for c in range(3))
  return bytes([label]) + planes


def write_cifar(directory, n=N, **overrides):
  """Writes the six batch files with ``n`` random records each; returns the arrays."""
  rng = np.random.default_rng(0)
  os.makedirs(directory, exist_ok=True)
  arrays = {}
  for name in NAMES:
    images, labels = rng.integers(0, 256, (n, 32, 32, 3), np.uint8), rng.integers(0, 10, n)
    data = b''.join(record(int(y), x) for x, y in zip(images, labels))
    with open(os.path.join(directory, name), 'wb') as f:
      f.write(overrides.get(name, data))
    arrays[name] = (images, labels)
  return arrays


def expected(arrays, names):
  return [np.concatenate([arrays[n][i] for n in names]) for i in (0, 1)]


def test_known_pixels_round_trip_with_channel_order(tmp_path):
  # Record 0 of the test batch: red plane = row index, green = column index, blue = 7.
  rows, cols = np.meshgrid(np.arange(32), np.arange(32), indexing='ij')
  image = np.stack([rows, cols, np.full((32, 32), 7)], axis=-1).astype(np.uint8)
  arrays = write_cifar(tmp_path)
  raw = record(4, image) + open(tmp_path / 'test_batch.bin', 'rb').read()[cifar10.RECORD_BYTES :]
  (tmp_path / 'test_batch.bin').write_bytes(raw)
  ds = load_cifar10(tmp_path, records_per_file=N)
  assert ds.test_x.shape == (N, 32, 32, 3) and ds.test_x.dtype == np.uint8
  assert ds.test_y[0] == 4 and ds.test_y.dtype == np.int32
  assert list(ds.test_x[0, 5, 9]) == [5, 9, 7]  # red = row, green = column, blue
  # Byte offsets straight from the format: pixel (r, c) of channel k is byte 1 + 1024k + 32r + c.
  assert raw[1 + 0 * 1024 + 32 * 5 + 9] == 5 and raw[1 + 1 * 1024 + 32 * 5 + 9] == 9
  for got, want in zip((ds.train_x, ds.train_y), expected(arrays, cifar10.TRAIN_FILES)):
    np.testing.assert_array_equal(got, want)  # batches 1..5 in order
  assert ds.train_x.shape == (5 * N, 32, 32, 3) and ds.num_classes == 10


def _tarball(directory, members):
  path = os.path.join(directory, cifar10.ARCHIVE)
  with tarfile.open(path, 'w:gz') as tar:
    for name, data in members.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return path


def _members(src):
  return {f'cifar-10-batches-bin/{n}': (src / n).read_bytes() for n in NAMES}


def test_reads_the_archive_without_extracting(tmp_path):
  arrays = write_cifar(tmp_path / 'src')
  dest = tmp_path / 'data'
  dest.mkdir()
  _tarball(dest, _members(tmp_path / 'src') | {'cifar-10-batches-bin/batches.meta.txt': b'a\n'})
  ds = load_cifar10(dest, records_per_file=N)
  for got, want in zip((ds.test_x, ds.test_y), expected(arrays, cifar10.TEST_FILES)):
    np.testing.assert_array_equal(got, want)
  assert sorted(os.listdir(dest)) == [cifar10.ARCHIVE]  # nothing written next to it


@pytest.mark.parametrize('python_version', [True, False])
def test_an_archive_of_the_python_version_or_truncated_is_refused(tmp_path, python_version):
  if python_version:
    _tarball(tmp_path, {'cifar-10-batches-py/data_batch_1': b'\x80\x04pickle'})
  else:
    write_cifar(tmp_path / 'src')
    raw = open(_tarball(tmp_path, _members(tmp_path / 'src')), 'rb').read()
    open(tmp_path / cifar10.ARCHIVE, 'wb').write(raw[: len(raw) // 2])
  match = 'binary version' if python_version else 'corrupt or truncated archive'
  with pytest.raises(DataError, match=match) as info:
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
  'missing': ('data_batch_4.bin', None, N, 'data_batch_4.bin: file not found'),
}


@pytest.mark.parametrize('case', sorted(CORRUPTIONS))
def test_corrupt_or_missing_files_raise_data_error_naming_file(tmp_path, case):
  name, data, records, fragment = CORRUPTIONS[case]
  write_cifar(tmp_path / 'cifar-10-batches-bin', **{name: data or b''})
  if data is None:
    os.remove(tmp_path / 'cifar-10-batches-bin' / name)
  with pytest.raises(DataError) as info:
    load_cifar10(tmp_path, records_per_file=records)
  assert fragment in str(info.value) and name in str(info.value) and '\n' not in str(info.value)


def idx_bytes(arr, code=0x08, ndim=None, dims=None, magic01=b'\x00\x00'):
  """Writes IDX bytes by hand from the format description (header overrides allowed)."""
  arr = np.asarray(arr)
  dims = arr.shape if dims is None else dims
  ndim = len(dims) if ndim is None else ndim
  header = magic01 + bytes([code, ndim]) + b''.join(struct.pack('>I', d) for d in dims)
  return header + arr.astype(arr.dtype.newbyteorder('>')).tobytes()


def write_fmnist(directory, gz=True, **overrides):
  """Writes a small, valid Fashion-MNIST lookalike; overrides replace raw file bytes."""
  rng = np.random.default_rng(0)
  arrays = {
    k: rng.integers(0, 256, (n, 28, 28), np.uint8) for k, n in (('train_x', 5), ('test_x', 3))
  }
  arrays |= {k: rng.integers(0, 10, n).astype(np.uint8) for k, n in (('train_y', 5), ('test_y', 3))}
  os.makedirs(directory, exist_ok=True)
  ext = '.gz' if gz else ''
  paths = {k: os.path.join(directory, stem + ext) for k, stem in fmnist.FILES.items()}
  for key, path in paths.items():
    data = overrides.get(key, idx_bytes(arrays[key]))
    with open(path, 'wb') as f:
      f.write(gzip.compress(data) if gz else data)
  return arrays, paths


@pytest.mark.skipif(not os.path.isdir(SYSTEM_DIR), reason=f'{SYSTEM_DIR} absent')
def test_real_fashion_mnist_and_the_masfl_federation():
  ds = load_fashion_mnist(SYSTEM_DIR)
  assert ds.train_x.shape == (60000, 28, 28) and ds.train_x.dtype == np.uint8
  assert ds.test_x.shape == (10000, 28, 28) and ds.test_y.dtype == np.int32
  assert ds.num_classes == 10 and ds.train_x.max() == 255 and ds.train_x.min() == 0
  # Fashion-MNIST is exactly balanced: 6,000 train and 1,000 test images per class.
  np.testing.assert_array_equal(np.bincount(ds.train_y, minlength=10), [6000] * 10)
  np.testing.assert_array_equal(np.bincount(ds.test_y, minlength=10), [1000] * 10)
  # MasFL App. E.1: N = 100 clients, Dir(0.5); 5% of the training split held out unlabeled.
  fd = make_federated(ds, 'dirichlet', 100, alpha=0.5, seed=0, unlabeled_size=3000)
  assert fd.x.shape == (57000, 28, 28) and fd.x.dtype == np.float32
  assert fd.unlabeled_x.shape == (3000, 28, 28) and fd.test_x.shape == (10000, 28, 28)
  assert fd.sizes.sum() == 57000 and fd.sizes.min() >= 10
  np.testing.assert_allclose(fd.test_x.mean(), 0.0, atol=0.05)  # train-split statistics
  np.testing.assert_allclose(fd.test_x.std(), 1.0, atol=0.05)


@pytest.mark.parametrize('gz', [True, False])
def test_fake_files_round_trip(tmp_path, gz):
  arrays, _ = write_fmnist(tmp_path, gz=gz)
  ds = load_fashion_mnist(tmp_path)
  for key, want in arrays.items():
    np.testing.assert_array_equal(getattr(ds, key), want)
  assert ds.train_y.dtype == np.int32


def _img(n=5):
  return np.zeros((n, 28, 28), np.uint8)


IDX_CORRUPTIONS = {
  'truncated payload': ('train_x', idx_bytes(_img())[:-7], 'truncated file'),
  'trailing bytes': ('train_x', idx_bytes(_img()) + b'xx', 'trailing bytes'),
  'truncated header': ('train_x', idx_bytes(_img())[:9], 'truncated header'),
  'empty file': ('test_y', b'', 'too short'),
  'bad magic': ('train_x', idx_bytes(_img(), magic01=b'\x12\x34'), 'bad IDX magic'),
  'wrong dtype': ('train_y', idx_bytes(np.zeros(5, np.int32), code=0x0C), 'expected 0x08 (ubyte)'),
  'wrong ndim': ('train_x', idx_bytes(np.zeros((5, 784), np.uint8)), 'expected 3'),
  'wrong image size': ('test_x', idx_bytes(np.zeros((3, 27, 28), np.uint8)), '(28, 28)'),
  'count mismatch': ('train_y', idx_bytes(np.zeros(4, np.uint8)), 'same count'),
  'label out of range': ('test_y', idx_bytes(np.array([1, 10, 2], np.uint8)), 'out of range'),
  'missing': ('test_y', None, 'not found'),  # a partial directory is no dataset
}


@pytest.mark.parametrize('case', sorted(IDX_CORRUPTIONS))
def test_corrupt_idx_files_raise_data_error_naming_file(tmp_path, case):
  key, data, fragment = IDX_CORRUPTIONS[case]
  _, paths = write_fmnist(tmp_path, gz=False, **{key: data or b''})
  if data is None:
    os.remove(paths[key])
  with pytest.raises(DataError) as info:
    load_fashion_mnist(tmp_path)
  assert fragment in str(info.value) and os.path.basename(paths[key]) in str(info.value)
  assert isinstance(info.value, ValueError)


def _flip(raw: bytes) -> bytes:
  out = bytearray(raw)
  out[len(out) // 2] ^= 0x55  # inside the deflate stream: CRC or stream error
  return bytes(out)


@pytest.mark.parametrize(
  'damage,fragment',
  [(lambda r: r[: len(r) // 2], 'gzip'), (_flip, 'idx3-ubyte.gz'), (None, 'truncated file')],
)
def test_a_damaged_gzip_names_the_gz_file(tmp_path, damage, fragment):
  if damage is None:  # a whole gzip of a truncated IDX file
    write_fmnist(tmp_path, gz=True, train_x=idx_bytes(np.zeros((5, 28, 28), np.uint8))[:-100])
  else:
    _, paths = write_fmnist(tmp_path, gz=True)
    raw = open(paths['train_x'], 'rb').read()
    open(paths['train_x'], 'wb').write(damage(raw))
  with pytest.raises(DataError) as info:
    load_fashion_mnist(tmp_path)
  assert fragment in str(info.value) and '\n' not in str(info.value)
  assert 'train-images-idx3-ubyte.gz' in str(info.value)


# ---- the search and its instructions, for both datasets ----------------------------------
LOADERS = {  # loader, its keywords for synthesized files, what its instructions name
  'cifar10': (load_cifar10, dict(records_per_file=N), ('BINARY', cifar10.SOURCE_URL)),
  'fmnist': (load_fashion_mnist, {}, ('sudo apt-get install dataset-fashion-mnist',)),
}


@pytest.mark.parametrize('name', sorted(LOADERS))
def test_nothing_found_names_the_places_and_the_ways_to_get_it(tmp_path, name, monkeypatch):
  load, kw, named = LOADERS[name]
  not_a_dir = tmp_path / 'file.txt'
  not_a_dir.write_text('x')
  for missing in (tmp_path / 'nowhere', not_a_dir):
    with pytest.raises(DataError) as info:
      load(missing, **kw)
    msg = str(info.value)
    assert str(missing) in msg and '--config.data_dir' in msg and 'AFL_JAX_DATA' in msg
    assert all(n in msg for n in named), msg

  def fail(url, timeout):
    raise urllib.error.URLError('no network in tests')

  monkeypatch.setattr(urllib.request, 'urlopen', fail)
  with pytest.raises(DataError, match='Download failed') as info:
    load(tmp_path / 'none', download=True, cache_dir=tmp_path / 'cache', **kw)
  assert all(n in str(info.value) for n in named)


@pytest.mark.parametrize('name', sorted(LOADERS))
def test_the_env_var_is_searched_and_a_download_is_cached(tmp_path, name, monkeypatch):
  load, kw, _ = LOADERS[name]
  if name == 'cifar10':  # the same files in $AFL_JAX_DATA/<subdirectory> and at the URL
    want = write_cifar(tmp_path / 'env' / 'cifar-10-batches-bin')['test_batch.bin'][0]
    path = _tarball(tmp_path, _members(tmp_path / 'env' / 'cifar-10-batches-bin'))
    by_url = {cifar10.SOURCE_URL: open(path, 'rb').read()}
  else:
    arrays, paths = write_fmnist(tmp_path / 'env' / 'fashion-mnist')
    want = arrays['test_x']
    by_url = {fmnist.SOURCE_URL + os.path.basename(p): open(p, 'rb').read() for p in paths.values()}
  monkeypatch.setenv('AFL_JAX_DATA', str(tmp_path / 'env'))
  np.testing.assert_array_equal(load(cache_dir=tmp_path / 'no-cache', **kw).test_x, want)
  monkeypatch.delenv('AFL_JAX_DATA')
  urls = []

  def fake_urlopen(url, timeout):
    urls.append(url)
    assert timeout <= 30
    return io.BytesIO(by_url[url])

  monkeypatch.setattr(urllib.request, 'urlopen', fake_urlopen)
  cache = tmp_path / 'cache'
  for _ in range(2):  # the second load reads the cache
    ds = load(tmp_path / 'none', download=True, cache_dir=cache, **kw)
    np.testing.assert_array_equal(ds.test_x, want)
  assert sorted(urls) == sorted(by_url)
  assert sorted(os.listdir(cache)) == sorted(u.rsplit('/', 1)[1] for u in by_url)
