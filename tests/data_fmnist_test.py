"""Tests of the strict IDX reader and the Fashion-MNIST loader (never touch the network)."""

import gzip
import os
import struct
import urllib.error
import urllib.request

import numpy as np
import pytest

from afl_jax.data import DataError, fmnist, load_fashion_mnist, make_federated, read_idx

SYSTEM_DIR = '/usr/share/datasets/fashion-mnist'


def idx_bytes(arr, code=0x08, ndim=None, dims=None, magic01=b'\x00\x00'):
  """Writes IDX bytes by hand from the format description (header overrides allowed)."""
  arr = np.asarray(arr)
  dims = arr.shape if dims is None else dims
  ndim = len(dims) if ndim is None else ndim
  header = magic01 + bytes([code, ndim]) + b''.join(struct.pack('>I', d) for d in dims)
  return header + arr.astype(arr.dtype.newbyteorder('>')).tobytes()


def write_fake(directory, n_train=5, n_test=3, gz=True, seed=0, **overrides):
  """Writes a small, valid Fashion-MNIST lookalike; overrides replace raw file bytes."""
  rng = np.random.default_rng(seed)
  arrays = {
    'train_x': rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
    'train_y': rng.integers(0, 10, n_train).astype(np.uint8),
    'test_x': rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
    'test_y': rng.integers(0, 10, n_test).astype(np.uint8),
  }
  os.makedirs(directory, exist_ok=True)
  paths = {}
  for key, stem in fmnist.FILES.items():
    data = overrides.get(key, idx_bytes(arrays[key]))
    path = os.path.join(directory, stem + ('.gz' if gz else ''))
    with open(path, 'wb') as f:
      f.write(gzip.compress(data) if gz else data)
    paths[key] = path
  return arrays, paths


@pytest.fixture(scope='module')
def real_fmnist():
  if not os.path.isdir(SYSTEM_DIR):
    pytest.skip(f'{SYSTEM_DIR} absent (sudo apt-get install dataset-fashion-mnist)')
  return load_fashion_mnist(SYSTEM_DIR)


def test_real_fashion_mnist_shapes_dtypes_and_labels(real_fmnist):
  ds = real_fmnist
  assert ds.train_x.shape == (60000, 28, 28) and ds.train_x.dtype == np.uint8
  assert ds.test_x.shape == (10000, 28, 28) and ds.test_x.dtype == np.uint8
  assert ds.train_y.shape == (60000,) and ds.train_y.dtype == np.int32
  assert ds.test_y.shape == (10000,) and ds.test_y.dtype == np.int32
  assert ds.num_classes == 10
  # Fashion-MNIST is exactly balanced: 6,000 train and 1,000 test images per class.
  np.testing.assert_array_equal(np.bincount(ds.train_y, minlength=10), [6000] * 10)
  np.testing.assert_array_equal(np.bincount(ds.test_y, minlength=10), [1000] * 10)
  assert ds.train_x.max() == 255 and ds.train_x.min() == 0


def test_real_fashion_mnist_masfl_federation(real_fmnist):
  # MasFL App. E.1: N = 100 clients, Dir(0.5); 5% of the training split held out unlabeled.
  fd = make_federated(real_fmnist, 'dirichlet', 100, alpha=0.5, seed=0, unlabeled_size=3000)
  assert fd.x.shape == (57000, 28, 28) and fd.x.dtype == np.float32
  assert fd.unlabeled_x.shape == (3000, 28, 28) and fd.test_x.shape == (10000, 28, 28)
  assert fd.sizes.sum() == 57000 and fd.sizes.min() >= 10
  np.testing.assert_allclose(fd.test_x.mean(), 0.0, atol=0.05)  # train-split statistics
  np.testing.assert_allclose(fd.test_x.std(), 1.0, atol=0.05)


@pytest.mark.parametrize('gz', [True, False])
def test_fake_files_round_trip(tmp_path, gz):
  arrays, _ = write_fake(tmp_path, gz=gz)
  ds = load_fashion_mnist(tmp_path)
  np.testing.assert_array_equal(ds.train_x, arrays['train_x'])
  np.testing.assert_array_equal(ds.train_y, arrays['train_y'])
  np.testing.assert_array_equal(ds.test_x, arrays['test_x'])
  np.testing.assert_array_equal(ds.test_y, arrays['test_y'])
  assert ds.train_y.dtype == np.int32


def test_read_idx_other_dtypes_big_endian(tmp_path):
  arr = np.array([[1, -2, 300], [70000, 5, -6]], dtype=np.int32)
  path = tmp_path / 'a.idx'
  path.write_bytes(idx_bytes(arr, code=0x0C))
  out = read_idx(path)
  np.testing.assert_array_equal(out, arr)
  assert out.dtype == np.int32 and out.dtype.isnative


def _img(n=5):
  return np.zeros((n, 28, 28), np.uint8)


CORRUPTIONS = {
  'truncated payload': ('train_x', idx_bytes(_img())[:-7], 'truncated file'),
  'trailing bytes': ('train_x', idx_bytes(_img()) + b'xx', 'trailing bytes'),
  'truncated header': ('train_x', idx_bytes(_img())[:9], 'truncated header'),
  'empty file': ('test_y', b'', 'too short'),
  'bad magic': ('train_x', idx_bytes(_img(), magic01=b'\x12\x34'), 'bad IDX magic'),
  'unknown dtype': ('train_y', idx_bytes(np.zeros(5, np.uint8), code=0x07), 'dtype code'),
  'wrong dtype': ('train_y', idx_bytes(np.zeros(5, np.int32), code=0x0C), 'expected ubyte'),
  'wrong ndim': ('train_x', idx_bytes(np.zeros((5, 784), np.uint8)), 'expected 3'),
  'wrong image size': ('test_x', idx_bytes(np.zeros((3, 27, 28), np.uint8)), '(28, 28)'),
  'count mismatch': ('train_y', idx_bytes(np.zeros(4, np.uint8)), 'same count'),
  'label out of range': ('test_y', idx_bytes(np.array([1, 10, 2], np.uint8)), 'out of range'),
}


@pytest.mark.parametrize('case', sorted(CORRUPTIONS))
def test_corrupt_files_raise_data_error_naming_file(tmp_path, case):
  key, data, fragment = CORRUPTIONS[case]
  _, paths = write_fake(tmp_path, gz=False, **{key: data})
  with pytest.raises(DataError) as info:
    load_fashion_mnist(tmp_path)
  msg = str(info.value)
  assert fragment in msg
  assert os.path.basename(paths[key]) in msg
  assert isinstance(info.value, ValueError)


def test_truncated_gzip_raises_data_error(tmp_path):
  _, paths = write_fake(tmp_path, gz=True)
  raw = open(paths['train_x'], 'rb').read()
  with open(paths['train_x'], 'wb') as f:
    f.write(raw[: len(raw) // 2])
  with pytest.raises(DataError, match='gzip') as info:
    load_fashion_mnist(tmp_path)
  assert 'train-images-idx3-ubyte.gz' in str(info.value)


def test_missing_dir_gives_install_instructions(tmp_path):
  missing = tmp_path / 'nowhere'
  with pytest.raises(DataError) as info:
    load_fashion_mnist(missing, download=False)
  msg = str(info.value)
  assert 'sudo apt-get install dataset-fashion-mnist' in msg
  assert '--config.data_dir' in msg and 'AFL_JAX_DATA' in msg
  assert str(missing) in msg


def test_partial_dir_is_not_accepted(tmp_path):
  _, paths = write_fake(tmp_path)
  os.remove(paths['test_y'])
  with pytest.raises(DataError, match='not found'):
    load_fashion_mnist(tmp_path)


def test_env_var_is_searched(tmp_path, monkeypatch):
  arrays, _ = write_fake(tmp_path / 'fashion-mnist', n_train=4)
  monkeypatch.setenv('AFL_JAX_DATA', str(tmp_path))  # Also tries DIR/fashion-mnist.
  ds = load_fashion_mnist()
  np.testing.assert_array_equal(ds.train_x, arrays['train_x'])


def test_failed_download_gives_instructions(tmp_path, monkeypatch):
  def fail(url, timeout):
    raise urllib.error.URLError('no network in tests')

  monkeypatch.setattr(urllib.request, 'urlopen', fail)
  with pytest.raises(DataError, match='Download failed') as info:
    load_fashion_mnist(tmp_path / 'none', download=True, cache_dir=tmp_path / 'cache')
  assert 'sudo apt-get install dataset-fashion-mnist' in str(info.value)


def test_download_into_cache_with_fake_server(tmp_path, monkeypatch):
  arrays, paths = write_fake(tmp_path / 'server', gz=True)
  by_name = {os.path.basename(p): open(p, 'rb').read() for p in paths.values()}
  urls = []

  class Response:
    def __init__(self, data):
      self.data = data

    def read(self):
      return self.data

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      return False

  def fake_urlopen(url, timeout):
    urls.append(url)
    assert timeout <= 30
    return Response(by_name[url.rsplit('/', 1)[1]])

  monkeypatch.setattr(urllib.request, 'urlopen', fake_urlopen)
  cache = tmp_path / 'cache'
  ds = load_fashion_mnist(tmp_path / 'none', download=True, cache_dir=cache)
  np.testing.assert_array_equal(ds.test_x, arrays['test_x'])
  assert all(u.startswith(fmnist.SOURCE_URL) for u in urls) and len(urls) == 4
  assert sorted(os.listdir(cache)) == sorted(by_name)


def test_bit_flipped_gzip_raises_data_error_naming_file(tmp_path):
  _, paths = write_fake(tmp_path, gz=True)
  raw = bytearray(open(paths['train_x'], 'rb').read())
  raw[len(raw) // 2] ^= 0x55  # inside the deflate stream: CRC or stream error
  open(paths['train_x'], 'wb').write(bytes(raw))
  with pytest.raises(DataError) as info:
    load_fashion_mnist(tmp_path)
  msg = str(info.value)
  assert 'train-images-idx3-ubyte.gz' in msg and '\n' not in msg


def test_gzip_of_truncated_idx_names_the_gz_file(tmp_path):
  data = idx_bytes(np.zeros((5, 28, 28), np.uint8))[:-100]
  _, paths = write_fake(tmp_path, gz=True, train_x=data)
  with pytest.raises(DataError, match='truncated file') as info:
    load_fashion_mnist(tmp_path)
  assert 'train-images-idx3-ubyte.gz' in str(info.value)


def test_data_dir_that_is_a_file_gives_instructions(tmp_path):
  not_a_dir = tmp_path / 'file.txt'
  not_a_dir.write_text('x')
  with pytest.raises(DataError, match='not found') as info:
    load_fashion_mnist(not_a_dir)
  assert str(not_a_dir) in str(info.value)


def test_read_idx_missing_file_names_it(tmp_path):
  with pytest.raises(DataError, match='file not found') as info:
    read_idx(tmp_path / 'absent-idx1-ubyte')
  assert 'absent-idx1-ubyte' in str(info.value)
