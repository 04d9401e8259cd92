"""Convolution and pooling at XLA:CPU's rate (docs/performance.md, "Convolutional models"):
:func:`fast_apply` re-evaluates a jaxpr with each convolution as :func:`direct` (NHWC x HWIO, both
gradients convolutions too) or :func:`tiled` (Winograd, ``winograd.TILES``), and each pooling whose
stride is its window as a reshape and reduction; other platforms keep ``lax``'s lowering."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jex_core

from afl_jax.models import winograd

PLATFORMS = ('cpu',)  # where the rules below beat XLA's own lowering (docs/performance.md)


def fast_apply(fn: Callable[..., Any]) -> Callable[..., Any]:
  """``fn`` with the rewrites on ``PLATFORMS``, else ``fn``; non-array arguments pass as given."""

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    if jax.default_backend() not in PLATFORMS:
      return fn(*args, **kwargs)
    leaves, tree = jax.tree.flatten((args, kwargs))
    traced = [isinstance(v, jax.Array | np.ndarray | np.generic) for v in leaves]
    arrays = [v for v, t in zip(leaves, traced) if t]

    def call(*arrays):  # fn of the array leaves, the other leaves as given
      it = iter(arrays)
      a, k = jax.tree.unflatten(tree, [next(it) if t else v for v, t in zip(leaves, traced)])
      return fn(*a, **k)

    closed, shape = jax.make_jaxpr(call, return_shape=True)(*arrays)
    if not _rewrites(closed.jaxpr):  # nothing to rewrite: the very program fn traces
      return fn(*args, **kwargs)
    out = _evaluate(closed.jaxpr, closed.consts, arrays)
    return jax.tree.unflatten(jax.tree.structure(shape), out)

  return wrapped


def one_at_a_time(jaxpr) -> bool:
  """Whether clients running ``jaxpr`` train faster one at a time than vmapped: where it
  convolves on a platform of ``PLATFORMS``."""
  return jax.default_backend() in PLATFORMS and _convolves(jaxpr)


def _convolves(jaxpr) -> bool:
  """Whether ``jaxpr`` (nested ones too) holds lax's convolution or a part of the rules' ones."""
  return any(
    eqn.primitive.name == 'conv_general_dilated'
    or getattr(eqn.params.get('rule'), 'one_client_each', False)
    or any(_convolves(sub) for sub in jex_core.jaxprs_in_params(eqn.params))
    for eqn in jaxpr.eqns
  )


def _rewrites(jaxpr) -> bool:
  return any(
    _rewrites(eqn.params['jaxpr'].jaxpr)
    if eqn.primitive.name == 'jit'
    else eqn.primitive.name in _RULES
    for eqn in jaxpr.eqns
  )


def _evaluate(jaxpr, consts, args) -> list:
  """``jaxpr`` on ``args``, each equation bound as traced unless a rule of ``_RULES`` takes it."""
  env = dict(zip(jaxpr.constvars, consts)) | dict(zip(jaxpr.invars, args))
  read = lambda v: v.val if isinstance(v, jex_core.Literal) else env[v]
  for eqn in jaxpr.eqns:
    values = [read(v) for v in eqn.invars]
    rule = _RULES.get(eqn.primitive.name)
    out = rule(*values, **eqn.params) if rule else None
    if out is None:  # no rule, or one the rule does not cover: as traced
      params = eqn.primitive.get_bind_params(eqn.params)
      subfuns, params = params if isinstance(params, tuple) else ((), params)  # JAX < 0.7
      with eqn.ctx.manager:
        out = eqn.primitive.bind(*subfuns, *values, **params)
    env.update(zip(eqn.outvars, out if eqn.primitive.multiple_results else [out]))
  return [read(v) for v in jaxpr.outvars]


def _inline_jit(*args, jaxpr, **unused):
  """A nested jit evaluated inline where it holds something to rewrite."""
  return _evaluate(jaxpr.jaxpr, jaxpr.consts, args) if _rewrites(jaxpr.jaxpr) else None


def _conv(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
          feature_group_count, batch_group_count, precision, preferred_element_type,
          out_sharding=None):  # fmt: skip
  """``lax.conv_general_dilated`` as :func:`tiled` or :func:`direct`, transposed in and out."""
  if feature_group_count != 1 or batch_group_count != 1 or set(lhs_dilation) != {1}:
    return None
  if out_sharding is not None or preferred_element_type not in (None, lhs.dtype):
    return None
  (n, c, *space), (o, i, *window_axes), out_spec = dimension_numbers
  x = lax.transpose(lhs, (n, *space, c))  # [N, *spatial, C]: no-ops for flax's NHWC x HWIO
  w = lax.transpose(rhs, (*window_axes, i, o))  # [*window, I, O]
  shape = (x.shape[1:-1], w.shape[:-2], tuple(window_strides), tuple(map(tuple, padding)))
  if min(_out_sizes(*shape, rhs_dilation)) < 1:
    return None
  m = winograd.tile(*shape, tuple(rhs_dilation), w.shape[-2:])
  conv = tiled(shape[0], m, precision) if m else direct(*shape, tuple(rhs_dilation), precision)
  y = conv(x, w)  # [N, *out, O]
  return lax.transpose(y, tuple(np.argsort((out_spec[0], *out_spec[2:], out_spec[1]))))


def _out_sizes(space, window, strides, padding, dilation) -> list[int]:
  zipped = zip(space, padding, window, dilation, strides)
  return [(size + lo + hi - (k - 1) * d - 1) // s + 1 for size, (lo, hi), k, d, s in zipped]


@functools.cache
def direct(space, window, strides, padding, dilation, precision=None) -> Callable:
  """``conv(x [N, *space, C], w [*window, C, O]) -> [N, *out, O]``, forward and both gradients
  each one NHWC x HWIO convolution: the input gradient convolves the stride-dilated output
  gradient with the flipped kernel, the kernel gradient ``x`` as ``[C, *space, N]`` with it."""
  n = len(space)
  dims = 'DHW'[3 - n :] if n <= 3 else ''.join(chr(ord('a') + i) for i in range(n))
  numbers = (f'N{dims}C', f'{dims}IO', f'N{dims}C')
  out = _out_sizes(space, window, strides, padding, dilation)
  conv = functools.partial(lax.conv_general_dilated, dimension_numbers=numbers, precision=precision)
  input_padding, kernel_padding = [], []  # of the gradients' convolutions (lax's transposition)
  for size, (lo, _), k, d, s, m in zip(space, padding, window, dilation, strides, out):
    input_padding.append(((k - 1) * d - lo, size - 1 - (m - 1) * s + lo))
    kernel_padding.append((lo, (m - 1) * s + 1 + (k - 1) * d - size - lo))
  spatial = tuple(range(n))

  @jax.named_scope('conv_forward')  # named for profiles (benchmark conv_step)
  def forward(x, w):
    return conv(x, w, strides, padding, rhs_dilation=dilation)

  @jax.named_scope('conv_input_grad')
  def input_grad(dy, w):
    flipped = jnp.swapaxes(lax.rev(w, spatial), -1, -2)  # [*window, O, C]
    return conv(dy, flipped, (1,) * n, input_padding, lhs_dilation=strides, rhs_dilation=dilation)

  @jax.named_scope('conv_kernel_grad')
  def kernel_grad(x, dy):
    # a product with the identity materializes x: XLA cannot fuse (recompute) its producers
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    x = jnp.einsum('nm,m...->n...', eye, x, precision=lax.Precision.HIGHEST)
    xt = jnp.moveaxis(x, (0, n + 1), (n + 1, 0))  # [C, *space, N]
    dyt = jnp.moveaxis(dy, 0, n)  # [*out, N, O]
    g = conv(xt, dyt, dilation, kernel_padding, rhs_dilation=strides)  # [C, *window, O]
    return jnp.moveaxis(g, 0, n)  # [*window, C, O]

  return differentiable(forward, input_grad, kernel_grad)


@functools.cache
def tiled(space, m, precision=None) -> Callable:
  """``conv(x [N, *space, C], w [3, 3, C, O])``, padding 1, stride 1, by Winograd's F(m, 3)."""
  return differentiable(*winograd.parts(space, m, precision))


def differentiable(forward, input_grad, kernel_grad, keep=None) -> Callable:
  """``forward(x, w)`` with gradients ``input_grad(dy, w)``, ``kernel_grad(r, dy)`` (``r``: ``x``
  or the second output of ``keep(x, w) -> (y, r)``), each one client at a time under vmap."""
  forward, input_grad, kernel_grad = map(_one_client_each, (forward, input_grad, kernel_grad))
  keep = _one_client_each(keep) if keep else lambda x, w: (forward(x, w), x)

  @jax.custom_vjp
  def convolve(x, w):
    return forward(x, w)

  def fwd(x, w):
    y, r = keep(x, w)
    return y, (r, w)

  def bwd(res, dy):
    r, w = res
    return input_grad(dy, w), kernel_grad(r, dy)

  convolve.defvjp(fwd, bwd)
  return convolve


def _one_client_each(fn: Callable) -> Callable:
  """``fn`` of one client's arrays; vmapped, one client at a time (``lax.map``)."""
  f = jax.custom_batching.custom_vmap(fn)

  @f.def_vmap
  def rule(axis_size, in_batched, *args):
    spread = lambda a, b: a if b else jnp.broadcast_to(a, (axis_size, *a.shape))
    args = [spread(a, b) for a, b in zip(args, in_batched)]
    out = f(*(a[0] for a in args)) if axis_size == 1 else lax.map(lambda a: f(*a), tuple(args))
    if axis_size == 1:
      out = jax.tree.map(lambda o: o[None], out)
    return out, jax.tree.map(lambda _: True, out)

  rule.one_client_each = True  # what one_at_a_time looks for
  return f


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _window_max(x, axes):
  return jnp.max(x, axes)


@_window_max.defjvp
def _window_max_jvp(axes, primals, tangents):
  """The tangent of each window's first maximum (``select_and_scatter_add``'s subgradient)."""
  (x,), (t,) = primals, tangents
  y = jnp.max(x, axes, keepdims=True)
  shape = [size if a in axes else 1 for a, size in enumerate(x.shape)]
  rank = jnp.arange(math.prod(shape)).reshape(shape)  # position within the window
  first = jnp.min(jnp.where(x == y, rank, rank.size), axes, keepdims=True)
  return jnp.squeeze(y, axes), jnp.sum(jnp.where(rank == first, t, jnp.zeros_like(t)), axes)


def _pool(reduce, identity):
  """A ``reduce_window`` whose windows are its strides: pad, crop, reshape, reduce."""

  def rule(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    if tuple(window_strides) != tuple(window_dimensions):
      return None
    if {*base_dilation, *window_dilation} != {1} or min(map(min, padding)) < 0:
      return None
    if not jnp.issubdtype(x.dtype, jnp.inexact):
      return None
    x = lax.pad(x, jnp.array(identity, x.dtype), [(lo, hi, 0) for lo, hi in padding])
    counts = [size // k for size, k in zip(x.shape, window_dimensions)]
    x = lax.slice(x, [0] * x.ndim, [m * k for m, k in zip(counts, window_dimensions)])
    x = x.reshape([d for m, k in zip(counts, window_dimensions) for d in (m, k)])
    return reduce(x, tuple(range(1, x.ndim, 2)))

  return rule


_RULES = {
  'jit': _inline_jit,
  'conv_general_dilated': _conv,
  'reduce_window_max': _pool(_window_max, -np.inf),
  'reduce_window_sum': _pool(jnp.sum, 0),
}
