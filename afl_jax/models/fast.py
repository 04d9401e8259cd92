"""Convolution and pooling as matrix products, for clients vmapped on CPU (docs/performance.md):
:func:`fast_apply` re-evaluates a function's jaxpr with each convolution as im2col patches times
the kernel and each pooling whose stride equals its window as a reshape and reduction (a max's
gradient to the first maximum, as ``select_and_scatter_add``); parameters and numerics up to
float32 rounding are the original's (tests/fast_test.py). Other platforms keep ``lax.conv``, and
so does the evaluator."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jex_core

PLATFORMS = ('cpu',)  # where the rules below beat XLA's own lowering (docs/performance.md)


def fast_apply(fn: Callable[..., Any]) -> Callable[..., Any]:
  """``fn`` with the rewrites on the platforms of ``PLATFORMS``, else ``fn`` itself."""

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    if jax.default_backend() not in PLATFORMS:
      return fn(*args, **kwargs)
    closed, shape = jax.make_jaxpr(functools.partial(fn, **kwargs), return_shape=True)(*args)
    if not _rewrites(closed.jaxpr):  # nothing to rewrite: the very program fn traces
      return fn(*args, **kwargs)
    out = _evaluate(closed.jaxpr, closed.consts, jax.tree.leaves(args))
    return jax.tree.unflatten(jax.tree.structure(shape), out)

  return wrapped


def _rewrites(jaxpr) -> bool:
  """Whether ``jaxpr`` (or a nested jit of it) holds an equation a rule may rewrite."""
  return any(
    _rewrites(eqn.params['jaxpr'].jaxpr)
    if eqn.primitive.name == 'jit'
    else eqn.primitive.name in _RULES
    for eqn in jaxpr.eqns
  )


def _evaluate(jaxpr, consts, args) -> list:
  """``jaxpr`` evaluated on ``args``, each equation bound as traced unless a rule of ``_RULES``
  takes it."""
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
  """A nested jit holding a convolution or pooling evaluated inline with the rules; any other kept
  as is."""
  return _evaluate(jaxpr.jaxpr, jaxpr.consts, args) if _rewrites(jaxpr.jaxpr) else None


def _conv(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
          feature_group_count, batch_group_count, precision, preferred_element_type,
          out_sharding=None):  # fmt: skip
  """``lax.conv_general_dilated`` as im2col patches times the kernel (one dot_general)."""
  if feature_group_count != 1 or batch_group_count != 1 or set(lhs_dilation) != {1}:
    return None
  if out_sharding is not None:
    return None
  (n, c, *space), (o, i, *window_axes), out_spec = dimension_numbers
  x = lax.transpose(lhs, (n, *space, c))  # [N, *spatial, C]
  w = lax.transpose(rhs, (*window_axes, i, o))  # [*window, I, O]
  edges = [(0, 0, 0), *((lo, hi, 0) for lo, hi in padding), (0, 0, 0)]
  x = lax.pad(x, jnp.zeros((), x.dtype), edges)
  window = w.shape[:-2]
  out = [
    (size - (k - 1) * d - 1) // s + 1
    for size, k, d, s in zip(x.shape[1:-1], window, rhs_dilation, window_strides)
  ]
  if min(out) < 1:
    return None

  def tap(offsets):  # the input under one kernel position, at every output position
    start = [t * d for t, d in zip(offsets, rhs_dilation)]
    stop = [b + (m - 1) * s + 1 for b, m, s in zip(start, out, window_strides)]
    return lax.slice(x, (0, *start, 0), (x.shape[0], *stop, x.shape[-1]), (1, *window_strides, 1))

  taps = [tap(t) for t in itertools.product(*map(range, window))]
  patches = taps[0] if len(taps) == 1 else lax.concatenate(taps, x.ndim - 1)
  y = lax.dot_general(
    patches,
    w.reshape(-1, w.shape[-1]),  # rows in the patches' order: window position, then channel
    (((x.ndim - 1,), (0,)), ((), ())),
    precision=precision,
    preferred_element_type=preferred_element_type,
  )  # [N, *out, O]
  return lax.transpose(y, tuple(np.argsort((out_spec[0], *out_spec[2:], out_spec[1]))))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _window_max(x, axes):
  return jnp.max(x, axes)


@_window_max.defjvp
def _window_max_jvp(axes, primals, tangents):
  """The tangent of the first maximum of each window (the subgradient ``select_and_scatter_add``
  picks)."""
  (x,), (t,) = primals, tangents
  y = jnp.max(x, axes, keepdims=True)
  shape = [size if a in axes else 1 for a, size in enumerate(x.shape)]
  rank = jnp.arange(math.prod(shape)).reshape(shape)  # position within the window
  first = jnp.min(jnp.where(x == y, rank, rank.size), axes, keepdims=True)
  return jnp.squeeze(y, axes), jnp.sum(jnp.where(rank == first, t, jnp.zeros_like(t)), axes)


def _pool(reduce, identity):
  """A ``reduce_window`` with windows equal to strides: pad with the identity, drop partial windows,
  reshape, reduce."""

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
