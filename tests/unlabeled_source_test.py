"""config.unlabeled_source: the server's unlabeled set, held out or external."""

import os

import numpy as np
import pytest

from afl_jax import data
from afl_jax.data import digits as unlabeled
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline.build import build_data

FMNIST_DIR = '/usr/share/datasets/fashion-mnist'


def fake_images(n=50, shape=(28, 28), seed=0):
  return np.random.default_rng(seed).integers(0, 256, size=(n, *shape), dtype=np.uint8)


@pytest.mark.parametrize('shape', [(28, 28), (32, 32, 3), (8, 8)])
def test_digits_take_the_training_images_frame_dtype_and_scale(shape):
  train_x = fake_images(shape=shape)
  raw = unlabeled.digits_images(40, train_x)
  assert raw.shape == (40, *shape) and raw.dtype == np.uint8
  assert raw.min() == 0 and raw.max() == 255  # 0..16 -> 0..255
  x = data.external_unlabeled('digits', 40, train_x)
  assert x.shape == (40, *shape) and x.dtype == np.float32
  norm = data.federated.normalizer(train_x)
  np.testing.assert_allclose(x, norm(raw))  # normalized exactly like the training images
  if len(shape) == 2 and shape[0] == 28:  # the 20x20 inner box, a 4-pixel empty border
    assert raw[:, :4].max() == 0 and raw[:, -4:].max() == 0
    assert raw[:, :, :4].max() == 0 and raw[:, :, -4:].max() == 0
    box = unlabeled.resize_into_frame(np.full((2, 8, 8), 0.5), 28, 28)  # constant stays so
    np.testing.assert_allclose(box[:, 4:24, 4:24], 0.5)
    assert box.sum() == pytest.approx(2 * 0.5 * 400)


def test_float_training_images_keep_their_range():
  train_x = np.random.default_rng(0).uniform(0.0, 1.0, (30, 8, 8)).astype(np.float32)
  raw = unlabeled.digits_images(1797, train_x)
  assert raw.dtype == np.float32 and raw.min() >= train_x.min() and raw.max() <= train_x.max()
  noise = data.external_unlabeled('noise', 20, train_x)
  assert noise.shape == (20, 8, 8) and noise.dtype == np.float32
  raw = unlabeled.noise_images(200, fake_images())  # uniform over the pixel range
  assert raw.shape == (200, 28, 28) and raw.dtype == np.uint8
  assert abs(raw.mean() - 127.5) < 2.0  # 156,800 pixels: std of the mean ~0.2


def test_digits_need_images_and_at_most_1797():
  with pytest.raises(ValueError, match='unlabeled_size=1798'):
    unlabeled.digits_images(1798, fake_images())
  with pytest.raises(ValueError, match='image training data'):
    unlabeled.digits_images(10, np.zeros((5, 60), np.float32))


def small(**overrides):
  c = config_lib.default()
  c.update({'dataset': 'digits', 'num_clients': 10, **overrides})
  return config_lib.resolve(c)


@pytest.mark.parametrize('source', ['digits', 'noise'])
def test_external_set_leaves_the_clients_data_of_heldout_with_size_0(source):
  base = build_data(small(unlabeled_size=0, validation_size=100))
  ext = build_data(small(unlabeled_source=source, unlabeled_size=300, validation_size=100))
  for f in ('x', 'y', 'index', 'offsets', 'sizes', 'test_x', 'test_y', 'val_x', 'val_y'):
    np.testing.assert_array_equal(getattr(ext, f), getattr(base, f))
  assert base.unlabeled_x.shape == (0, 8, 8)
  assert ext.unlabeled_x.shape == (300, 8, 8) and ext.unlabeled_x.dtype == np.float32
  again = build_data(small(unlabeled_source=source, unlabeled_size=300, seed=5))
  np.testing.assert_array_equal(again.unlabeled_x, ext.unlabeled_x)  # not the run's seed


def test_heldout_is_unchanged():
  lay = build_data(small(unlabeled_size=200))
  ref = data.federate(data.load_digits(seed=0), 'dirichlet', 10, alpha=0.5, unlabeled_size=200)
  for f in ('x', 'index', 'offsets', 'sizes', 'unlabeled_x'):
    np.testing.assert_array_equal(getattr(lay, f), getattr(ref, f))


@pytest.mark.skipif(not os.path.isdir(FMNIST_DIR), reason='Fashion-MNIST absent')
def test_fmnist_with_digits_distils_on_28x28_digits():
  c = small(dataset='fmnist', train_subset=3000, num_clients=30)
  c.unlabeled_source, c.unlabeled_size = 'digits', 500
  config_lib.validate(c)
  lay = build_data(c)
  assert lay.unlabeled_x.shape == (500, 28, 28) and lay.unlabeled_x.dtype == np.float32
  assert int(lay.sizes.sum()) == 3000  # no sample taken from the clients
  # Same scale as the normalized training images: the background is their minimum.
  assert lay.unlabeled_x.min() == pytest.approx(lay.x.min())
  assert lay.unlabeled_x.max() == pytest.approx(lay.x.max())
