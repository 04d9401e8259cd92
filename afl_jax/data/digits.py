"""scikit-learn's 8x8 digits as a dataset, and external unlabeled server sets (FedEcho Sec. 5.1):
'digits' upsampled into the training frame, or 'noise' (docs/configs.md)."""

from __future__ import annotations

import numpy as np

from afl_jax.data.base import ArrayDataset, normalizer

UNLABELED_SOURCES = ('heldout', 'digits', 'noise')
DIGITS_COUNT = 1797
_DIGITS_STREAM, _NOISE_STREAM = 0xD1617, 0x2015E  # fixed choices among the digits, of noise
_INNER = 20 / 28  # MNIST: a 20x20 digit centred in a 28x28 frame


def digit_images() -> tuple[np.ndarray, np.ndarray]:
  from sklearn.datasets import load_digits as _sk_load_digits

  bunch = _sk_load_digits()
  return np.asarray(bunch.images, np.float64) / 16.0, np.asarray(bunch.target, np.int32)


def load_digits(*, seed: int = 0) -> ArrayDataset:
  """The digits with a 80/20 train/test split seeded by ``seed``."""
  images, y = digit_images()
  x, perm = images.astype(np.float32), np.random.default_rng(seed).permutation(len(y))
  test, train = perm[: int(round(0.2 * len(y)))], perm[int(round(0.2 * len(y))) :]
  return ArrayDataset(x[train], y[train], x[test], y[test], 10)


def _linear_weights(n_out: int, n_in: int) -> np.ndarray:
  """float64[n_out, n_in]: bilinear resampling (pixel centres aligned)."""
  pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0.0, n_in - 1)
  lo = np.floor(pos).astype(int)
  w = np.zeros((n_out, n_in))
  w[np.arange(n_out), lo] += 1.0 - (pos - lo)
  w[np.arange(n_out), np.minimum(lo + 1, n_in - 1)] += pos - lo
  return w


def resize_into_frame(images: np.ndarray, height: int, width: int) -> np.ndarray:
  """float64[n, height, width]: ``images`` [n, h, w] resized into a centred inner box."""
  box_h, box_w = max(1, round(height * _INNER)), max(1, round(width * _INNER))
  wh, ww = _linear_weights(box_h, images.shape[1]), _linear_weights(box_w, images.shape[2])
  out = np.zeros((len(images), height, width))
  top, left = (height - box_h) // 2, (width - box_w) // 2
  out[:, top : top + box_h, left : left + box_w] = np.einsum(
    'ah,nhw,bw->nab', wh, images.astype(np.float64), ww
  )
  return out


def _to_raw(images01: np.ndarray, train_x: np.ndarray) -> np.ndarray:
  """Images in [0, 1] at the raw pixel scale, dtype and channels of ``train_x``."""
  uint8 = train_x.dtype == np.uint8
  low, high = (0.0, 255.0) if uint8 else (float(np.min(train_x)), float(np.max(train_x)))
  x = low + (high - low) * images01
  x = np.clip(np.rint(x), 0, 255).astype(np.uint8) if uint8 else x.astype(train_x.dtype)
  if x.ndim < train_x.ndim:  # [n, h, w] on [n, h, w, c]
    x = np.repeat(x[..., None], train_x.shape[3], axis=3)
  return x


def digits_images(size: int, train_x: np.ndarray) -> np.ndarray:
  """``size`` (<= 1797, a fixed choice) digits in the frame, at the training images' scale."""
  if not 0 <= size <= DIGITS_COUNT:
    raise ValueError(f'unlabeled_size={size!r} must be in [0, {DIGITS_COUNT}] for digits')
  if train_x.ndim not in (3, 4):
    raise ValueError(f'digits need image training data [n, h, w(, c)]; got {train_x.shape}')
  digits = digit_images()[0]
  pick = np.sort(np.random.default_rng(_DIGITS_STREAM).permutation(len(digits))[:size])
  images = resize_into_frame(digits[pick], train_x.shape[1], train_x.shape[2])
  return _to_raw(np.clip(images, 0.0, 1.0), train_x)


def noise_images(size: int, train_x: np.ndarray) -> np.ndarray:
  """``size`` images of i.i.d. uniform pixels, shaped and scaled like ``train_x``."""
  if size < 0:
    raise ValueError(f'unlabeled_size={size!r} must be >= 0')
  u = np.random.default_rng(_NOISE_STREAM).uniform(size=(size, *train_x.shape[1:]))
  return _to_raw(u, train_x)


def external_unlabeled(source: str, size: int, train_x: np.ndarray) -> np.ndarray:
  """float32[size, ...]: the set ``source`` normalized like ``train_x``."""
  images = {'digits': digits_images, 'noise': noise_images}.get(source)
  if images is None:
    raise ValueError(f'unlabeled_source={source!r} must be one of {UNLABELED_SOURCES[1:]}')
  return np.asarray(normalizer(train_x)(images(size, train_x)), np.float32)
