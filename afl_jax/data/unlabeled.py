"""Unlabeled server sets not drawn from the clients' distribution, as FedEcho distils on external
data (Sec. 5.1): 'digits' upsampled into the training frame, or 'noise'; they depend only on
their size and the training images' shape and scale (docs/configs.md)."""

from __future__ import annotations

import numpy as np

from afl_jax.data.base import normalizer
from afl_jax.data.digits import digit_images

UNLABELED_SOURCES = ('heldout', 'digits', 'noise')
DIGITS_COUNT = 1797  # scikit-learn's digits (UCI optdigits test set)
_DIGITS_STREAM = 0xD1617  # fixed choice among the digits
_NOISE_STREAM = 0x2015E
_INNER = 20 / 28  # MNIST: a 20x20 digit centred in a 28x28 frame


def _linear_weights(n_out: int, n_in: int) -> np.ndarray:
  """float64[n_out, n_in]: bilinear resampling matrix (pixel centres aligned)."""
  pos = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
  pos = np.clip(pos, 0.0, n_in - 1)
  lo = np.floor(pos).astype(int)
  hi = np.minimum(lo + 1, n_in - 1)
  frac = pos - lo
  w = np.zeros((n_out, n_in))
  w[np.arange(n_out), lo] += 1.0 - frac
  w[np.arange(n_out), hi] += frac
  return w


def resize_into_frame(images: np.ndarray, height: int, width: int) -> np.ndarray:
  """float64[n, height, width]: ``images`` [n, h, w] resized into a centred inner box."""
  box_h, box_w = max(1, round(height * _INNER)), max(1, round(width * _INNER))
  wh = _linear_weights(box_h, images.shape[1])
  ww = _linear_weights(box_w, images.shape[2])
  inner = np.einsum('ah,nhw,bw->nab', wh, images.astype(np.float64), ww)
  out = np.zeros((len(images), height, width))
  top, left = (height - box_h) // 2, (width - box_w) // 2
  out[:, top : top + box_h, left : left + box_w] = inner
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
  digits = digit_images()[0]  # [1797, 8, 8] in [0, 1]
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
  if source == 'digits':
    raw = digits_images(size, train_x)
  elif source == 'noise':
    raw = noise_images(size, train_x)
  else:
    raise ValueError(f'unlabeled_source={source!r} must be one of {UNLABELED_SOURCES[1:]}')
  return np.asarray(normalizer(train_x)(raw), np.float32)
