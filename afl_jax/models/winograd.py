"""3x3 stride-1 convolutions by Winograd's F(m x m, 3 x 3) (Lavin and Gray, CVPR 2016: ``Y = A^T
[(G g G^T) . (B^T d B)] A`` over tiles of ``m + 2`` inputs), for the layers where they beat
XLA:CPU's (docs/performance.md): ``(m + 2)^2`` matrix products ``[tiles, C] x [C, O]``, each
transform one product with a Kronecker matrix (``B^T d B = (B^T (x) B^T) vec d``)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# (B^T, G, A^T) of F(2, 3) and F(4, 3): interpolation points 0, +-1 (and +-2 for m = 4), inf.
# fmt: off
TRANSFORMS = {
  2: ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
      [[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]],
      [[1, 1, 1, 0], [0, 1, -1, -1]]),
  4: ([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
       [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
      [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
       [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
      [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
}
# fmt: on

# Output tile per layer (height = width, channels in = out), measured on CPU against fast.direct.
TILES = {(32, 64): 4, (16, 128): 4, (8, 256): 4, (4, 512): 2}


def tile(space, window, strides, padding, dilation, channels) -> int | None:
  """The output tile ``m`` for this convolution, or None (measured slower, or not 2-D 3x3, stride 1,
  padding 1, undilated)."""
  if tuple(window) != (3, 3) or set(strides) != {1} or set(dilation) != {1}:
    return None
  if tuple(map(tuple, padding)) != ((1, 1), (1, 1)) or space[0] != space[1]:
    return None
  cin, cout = channels
  return TILES.get((space[0], cin)) if cin == cout else None


def parts(space, m, precision=None) -> tuple[Callable, Callable, Callable, Callable]:
  """``(forward, input_grad, kernel_grad, keep)`` of ``x [N, H, W, C] * w [3, 3, C, O]`` (padding
  1, stride 1) for fast.differentiable: ``keep`` also returns the input tiles ``V``; the input
  gradient is the same route with the flipped kernel; the kernel gradient ``G^T (V^T dM) G``."""
  bt, g, at = (np.asarray(a, np.float64) for a in TRANSFORMS[m])
  a = m + 2
  h, wd = space
  th, tw = -(-h // m), -(-wd // m)  # tiles per side; the last may hang over (zeros, cropped)
  bb, gg, aa = np.kron(bt, bt), np.kron(g, g), np.kron(at, at)  # [a*a, a*a], [a*a, 9], [m*m, a*a]

  def transform(matrix, d):  # [p, q] x [q, ...]
    return jnp.dot(matrix.astype(d.dtype), d, precision=lax.Precision.HIGHEST)

  def products(v, u):  # [a*a, T, C] x [a*a, C, O]
    return jnp.einsum('btc,bco->bto', v, u, precision=precision)

  def input_tiles(x):  # [N, H, W, C] -> V [a*a, N*th*tw, C]
    n, c = x.shape[0], x.shape[-1]
    xp = jnp.pad(x, ((0, 0), (1, th * m + 1 - h), (1, tw * m + 1 - wd), (0, 0)))
    end = lambda r, s: (n, r + m * (th - 1) + 1, s + m * (tw - 1) + 1, c)
    tap = lambda r, s: lax.slice(xp, (0, r, s, 0), end(r, s), (1, m, m, 1))  # [N, th, tw, C]
    d = jnp.stack([tap(r, s) for r in range(a) for s in range(a)]).reshape(a * a, -1)
    return transform(bb, d).reshape(a * a, n * th * tw, c)

  def kernel_tiles(w):  # [3, 3, C, O] -> U [a*a, C, O]
    return transform(gg, w.reshape(9, -1)).reshape(a * a, *w.shape[2:])

  def output(mm, n):  # M [a*a, N*th*tw, O] -> [N, H, W, O]
    y = transform(aa, mm.reshape(a * a, -1)).reshape(m, m, n, th, tw, -1)
    y = jnp.transpose(y, (2, 3, 0, 4, 1, 5))  # [N, th, m, tw, m, O]: the tiles in place
    return y.reshape(n, th * m, tw * m, -1)[:, :h, :wd]

  def output_transposed(dy):  # [N, H, W, O] -> dM [a*a, N*th*tw, O]
    n, o = dy.shape[0], dy.shape[-1]
    dy = jnp.pad(dy, ((0, 0), (0, th * m - h), (0, tw * m - wd), (0, 0)))
    dy = dy.reshape(n, th, m, tw, m, o)
    d = jnp.transpose(dy, (2, 4, 0, 1, 3, 5)).reshape(m * m, -1)  # [m*m, N*th*tw*O]
    return transform(aa.T, d).reshape(a * a, n * th * tw, o)

  def kernel_transposed(du):  # dU [a*a, C, O] -> [3, 3, C, O]
    return transform(gg.T, du.reshape(a * a, -1)).reshape(3, 3, *du.shape[1:])

  def convolve(x, w):  # the output and V
    v = input_tiles(x)
    return output(products(v, kernel_tiles(w)), x.shape[0]), v

  keep = jax.named_scope('conv_forward')(convolve)  # the three named for profiles

  @jax.named_scope('conv_input_grad')
  def input_grad(dy, w):
    return convolve(dy, jnp.swapaxes(w[::-1, ::-1], 2, 3))[0]

  @jax.named_scope('conv_kernel_grad')
  def kernel_grad(v, dy):
    du = jnp.einsum('btc,bto->bco', v, output_transposed(dy), precision=precision)
    return kernel_transposed(du)

  return (lambda x, w: keep(x, w)[0]), input_grad, kernel_grad, keep
