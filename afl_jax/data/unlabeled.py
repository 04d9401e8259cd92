"""Unlabeled server sets that are not drawn from the clients' distribution.

FedEcho (paper 002, Sec. 5.1) distils on an external unlabeled set (CIFAR-100,
STL10 or generated images for CIFAR-10 clients). ``config.unlabeled_source``
chooses the server's set:

* ``'heldout'``: ``unlabeled_size`` training samples held out from the clients
  (:func:`afl_jax.data.federate`; the default).
* ``'digits'``: ``unlabeled_size`` of scikit-learn's 1,797 8x8 handwritten digits
  (a different dataset), bilinearly upsampled into the training images' frame
  (a 20/28 inner box centred in zero padding, MNIST's layout) and brought to the
  training images' raw pixel scale (0..16 -> 0..255 for uint8 images), then
  normalized like the training images. Grey images are repeated over colour
  channels.
* ``'noise'``: ``unlabeled_size`` images of i.i.d. uniform pixels over the raw
  pixel range, normalized like the training images (a generated set with no
  structure at all).

The external sets are fixed: they depend only on their size and the training
images' shape and scale, never on the run's seed, and they take no sample from the
clients.
"""

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
  """Images in [0, 1] -> the raw pixel scale (0..255 for uint8, else the range of
  ``train_x``) and dtype of ``train_x``; grey ``[n, h, w]`` images are repeated over
  its colour channels."""
  uint8 = train_x.dtype == np.uint8
  low, high = (0.0, 255.0) if uint8 else (float(np.min(train_x)), float(np.max(train_x)))
  x = low + (high - low) * images01
  x = np.clip(np.rint(x), 0, 255).astype(np.uint8) if uint8 else x.astype(train_x.dtype)
  if x.ndim < train_x.ndim:  # [n, h, w] on [n, h, w, c]
    x = np.repeat(x[..., None], train_x.shape[3], axis=3)
  return x


def digits_images(size: int, train_x: np.ndarray) -> np.ndarray:
  """``size`` scikit-learn digits in the frame, raw scale and dtype of ``train_x``.

  Args:
    size: number of images, in ``[0, 1797]`` (a fixed choice, the same every call).
    train_x: the training images ``[n, h, w]`` or ``[n, h, w, c]``.

  Raises:
    ValueError: ``size`` out of range, or ``train_x`` not images.
  """
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
  """float32[size, ...]: the external set ``source``, normalized like ``train_x``.

  Args:
    source: ``'digits'`` or ``'noise'`` (``'heldout'`` is built by ``federate``).
    size: number of samples.
    train_x: the raw training images (shape, dtype and pixel scale to match; the
      normalizer of the training data, :func:`afl_jax.data.base.normalizer`).
  """
  if source == 'digits':
    raw = digits_images(size, train_x)
  elif source == 'noise':
    raw = noise_images(size, train_x)
  else:
    raise ValueError(f'unlabeled_source={source!r} must be one of {UNLABELED_SOURCES[1:]}')
  return np.asarray(normalizer(train_x)(raw), np.float32)
