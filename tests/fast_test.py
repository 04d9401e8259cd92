"""afl_jax.models.fast_apply: convolutions (fast.direct, fast.tiled) and poolings equal lax's own.

float32 (eps = 2^-23), the rewrites sum in another order; against float64 ("exact"): ``||fast -
exact|| <= 2 ||lax - exact|| + 4 sqrt(n) eps ||exact||`` over every output and gradient, ``n`` the
longest sum. Max-pools and their gradients select: bit for bit, ties included. Each case asserts
the rewrite happened or, where it does not apply, that lax's operation is kept.
"""

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jex_core

from afl_jax import models
from afl_jax.models import fast, fast_apply, winograd

EPS = float(np.finfo(np.float32).eps)
RNG = np.random.default_rng(0)
CLIENTS = 3


def normal(*shape):
  return jnp.asarray(RNG.normal(size=shape), jnp.float32)


def _norm(tree):
  return math.sqrt(sum(np.sum(np.square(np.asarray(v, np.float64))) for v in jax.tree.leaves(tree)))


def _distance(a, b):
  f64 = lambda v: np.asarray(v, np.float64)
  return _norm(jax.tree.map(lambda u, v: f64(u) - f64(v), a, b))


def _lax_ops(fn, *args):
  """The convolutions and poolings ``fn`` binds as lax's own (nested jits included)."""

  def names(jaxpr):
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == 'custom_vmap_call':
        continue
      yield eqn.primitive.name
      for sub in jex_core.jaxprs_in_params(eqn.params):
        yield from names(sub)

  wanted = ('conv_general_dilated', 'reduce_window', 'select_and_scatter')
  return {n for n in names(jax.make_jaxpr(fn)(*args).jaxpr) if n.startswith(wanted)}


def assert_as_accurate(make, apply, args, n, rewritten=True):
  lax32 = jax.jit(make(apply))(*args)
  fast32 = jax.jit(make(fast_apply(apply)))(*args)
  with jax.enable_x64(True):
    args64 = jax.tree.map(lambda v: jnp.asarray(v, jnp.float64), args)
    exact = jax.jit(make(apply))(*args64)
  error, bound = _distance(fast32, exact), _distance(lax32, exact)
  assert error <= 2 * bound + 4 * math.sqrt(n) * EPS * _norm(exact), (error, bound)
  kept = _lax_ops(make(fast_apply(apply)), *args)
  assert bool(kept) != rewritten, kept


def _grads(apply):
  """Outputs and the gradients of a loss wrt params and input."""
  loss = lambda p, x: jnp.sum(jnp.sin(apply(p, x)))  # a cotangent that varies per output
  return lambda params, x: (apply(params, x), jax.grad(loss, argnums=(0, 1))(params, x))


outputs_and_grads = lambda apply: jax.vmap(_grads(apply))  # vmapped over clients


def client_params(model, x):
  keys = jax.random.split(jax.random.key(1), CLIENTS)
  return jax.vmap(lambda k: model.init(k, x[0]))(keys)


class Conv(nn.Module):
  settings: dict

  @nn.compact
  def __call__(self, x):
    return nn.Conv(6, **self.settings)(x)


# fmt: off
CONVS = {  # settings, rewritten by fast_apply
  'same_bias': (dict(kernel_size=(3, 3), padding='SAME'), True),
  'same_stride2_no_bias': (dict(kernel_size=(3, 3), strides=2, use_bias=False), True),
  'valid': (dict(kernel_size=(3, 3), padding='VALID'), True),
  'explicit_padding_strides': (dict(kernel_size=(2, 3), strides=(2, 1), padding=((1, 0), (2, 1))),
                               True),
  'kernel_dilation': (dict(kernel_size=(3, 3), kernel_dilation=2, padding='SAME'), True),
  'one_by_one_stride2': (dict(kernel_size=(1, 1), strides=2, use_bias=False), True),
  'circular': (dict(kernel_size=(3, 3), padding='CIRCULAR'), True),
  'one_dimensional': (dict(kernel_size=(3,), padding='SAME'), True),
  'grouped_kept': (dict(kernel_size=(3, 3), feature_group_count=2, use_bias=False), False),
  'input_dilation_kept': (dict(kernel_size=(3, 3), input_dilation=2, padding=((1, 1),) * 2), False),
}
# fmt: on


@pytest.mark.parametrize('case', sorted(CONVS))
def test_conv_equals_lax_under_vmap(case):
  settings, rewritten = CONVS[case]
  shape = (CLIENTS, 2, 9) if case == 'one_dimensional' else (CLIENTS, 2, 9, 10)
  x = normal(*shape, 4)
  model = Conv(settings)
  params = client_params(model, x)
  n = 9 * 4 * 2 * 9 * 10  # kernel gradient: batch x positions x (window x channels) at most
  assert_as_accurate(outputs_and_grads, model.apply, (params, x), n, rewritten)


# fmt: off
POOLS = {  # pooling, rewritten by fast_apply
  'max_2x2': (lambda x: nn.max_pool(x, (2, 2), (2, 2)), True),
  'max_3x3_same': (lambda x: nn.max_pool(x, (3, 3), (3, 3), padding='SAME'), True),
  'avg_2x2': (lambda x: nn.avg_pool(x, (2, 2), (2, 2)), True),
  'avg_2x2_same_exclude_pad': (lambda x: nn.avg_pool(x, (2, 2), (2, 2), padding='SAME',
                                                     count_include_pad=False), True),
  'max_overlapping_kept': (lambda x: nn.max_pool(x, (3, 3), (2, 2)), False),
}
# fmt: on


class Pool(nn.Module):
  """A conv (so the pool's input depends on the params), then a pool."""

  pool: object

  @nn.compact
  def __call__(self, x):
    return self.pool(nn.Conv(4, (1, 1))(x))


@pytest.mark.parametrize('case', sorted(POOLS))
def test_pooling_equals_reduce_window_under_vmap(case):
  pool, rewritten = POOLS[case]
  x = normal(CLIENTS, 2, 9, 10, 3)
  model = Pool(pool)
  params = client_params(model, x)
  n = 2 * 9 * 10  # the 1x1 kernel's gradient: batch x positions
  assert_as_accurate(outputs_and_grads, model.apply, (params, x), n, rewritten)


@pytest.mark.parametrize('padding', ['VALID', 'SAME'])
def test_max_pool_and_its_gradient_bit_for_bit_with_ties(padding):
  x = jnp.round(normal(CLIENTS, 2, 9, 10, 3))  # few distinct values: most windows tie
  pool = lambda x: nn.max_pool(x, (3, 3), (3, 3), padding=padding)
  cotangent = normal(*jax.eval_shape(jax.vmap(pool), x).shape)
  vjp = lambda pool: jax.vmap(lambda x, t: jax.vjp(pool, x)[1](t)[0])
  np.testing.assert_array_equal(jax.jit(fast_apply(pool))(x), jax.jit(pool)(x))
  got = jax.jit(vjp(fast_apply(pool)))(x, cotangent)
  np.testing.assert_array_equal(got, jax.jit(vjp(pool))(x, cotangent))
  assert not _lax_ops(vjp(fast_apply(pool)), x, cotangent)


@pytest.mark.parametrize(
  'name, shape, n',
  [
    ('cnn', (2, 28, 28, 1), 2 * 28 * 28 * 9),  # conv1's kernel gradient: batch x positions
    ('resnet18', (2, 32, 32, 3), 2 * 32 * 32 * 9 * 8),  # a block's first kernel gradient
  ],
)
def test_project_models_equal_lax_under_vmap(name, shape, n, monkeypatch):
  """The CNN; ResNet-18 at narrow widths, two stages' 3x3 layers by Winograd F(4x4), F(2x2)."""
  widths = {'resnet18': dict(stage_features=(8, 16, 16, 16))}
  narrow = {(16, 16): 4, (4, 16): 2}  # a stage of each tile (the others as in the default)
  if name == 'resnet18':
    monkeypatch.setattr(winograd, 'TILES', narrow)
  model = models.make(name, num_classes=10, **widths.get(name, {}))
  x = normal(CLIENTS, *shape)
  params = client_params(model, x)
  assert_as_accurate(outputs_and_grads, model.apply, (params, x), n)


def test_parameter_trees_unchanged():
  """init through fast_apply gives the same tree (names, shapes, values)."""
  model = models.make('cnn', num_classes=10)
  x = jnp.zeros((1, 28, 28, 1))
  params = model.init(jax.random.key(0), x)
  same = fast_apply(model.init)(jax.random.key(0), x)
  jax.tree.map(np.testing.assert_array_equal, same, params)


def test_arguments_pass_through_and_other_platforms_keep_lax(monkeypatch):
  """Keyword arguments reach the function, a convolution in a nested jit is rewritten, a
  positional non-array argument (a Python flag, issue 46) reaches it untraced; off PLATFORMS
  lax's convolution is kept."""
  model = Conv(CONVS['same_bias'][0])
  x = normal(2, 9, 10, 4)
  params = model.init(jax.random.key(0), x)
  apply = lambda p, x, scale=1.0: jax.jit(model.apply)(p, x) * scale
  assert_as_accurate(lambda f: lambda p, x: f(p, x, scale=3.0), apply, (params, x), n=9 * 4)

  def flagged(p, x, train, mode='max'):
    assert isinstance(train, bool) and mode == 'max'
    return apply(p, x, 2.0 if train else 1.0)

  for train in (False, True):
    want = jax.jit(lambda p, x, train=train: flagged(p, x, train))(params, x)
    got = jax.jit(lambda p, x, train=train: fast_apply(flagged)(p, x, train, mode='max'))(params, x)
    np.testing.assert_array_equal(got, want)  # forward: the same convolution in flax's layout
  monkeypatch.setattr(fast, 'PLATFORMS', ('gpu', 'tpu'))
  assert _lax_ops(fast_apply(model.apply), params, x) == {'conv_general_dilated'}


def test_functions_without_convolution_or_pooling_are_traced_unchanged():
  """An MLP (its jitted log-softmax included) is the very program it was: same numerics."""
  model = models.make('mlp', num_classes=10)
  x = normal(4, 28, 28)
  params = model.init(jax.random.key(0), x)
  loss = lambda p: jnp.mean(jax.nn.log_softmax(model.apply(p, x)))
  program = lambda f: str(jax.make_jaxpr(jax.grad(f))(params))
  assert program(fast_apply(loss)) == program(loss)


def one_client_and_shared_kernel(apply):
  """Outputs and gradients without vmap (one client), and vmapped over inputs with one kernel."""
  grads = _grads(apply)
  return lambda params, x: (grads(params, x[0]), jax.vmap(grads, in_axes=(None, 0))(params, x))


@pytest.mark.parametrize('clients', [1, CLIENTS])
def test_conv_one_client_and_a_kernel_shared_by_clients(clients):
  """Outside vmap, under vmap of one client (the axis dropped) and with a kernel not mapped."""
  x = normal(clients, 2, 9, 10, 4)
  model = Conv(CONVS['same_stride2_no_bias'][0])
  params = model.init(jax.random.key(1), x[0])
  assert_as_accurate(one_client_and_shared_kernel, model.apply, (params, x), n=9 * 4 * 2 * 9 * 10)


def test_one_at_a_time_where_a_client_convolves(monkeypatch):
  """Clients go one at a time where their update convolves on a platform of PLATFORMS."""
  cnn = models.make('cnn', num_classes=10, conv_features=(4,), pool_after=(True,))
  mlp = models.make('mlp', num_classes=10)
  x = normal(2, 28, 28, 1)

  def jaxpr(model, x=x):
    grad = jax.grad(lambda p: fast_apply(model.apply)(p, x).sum())
    return jax.make_jaxpr(grad)(model.init(jax.random.key(0), x)).jaxpr

  assert fast.one_at_a_time(jaxpr(cnn)) and not fast.one_at_a_time(jaxpr(mlp))
  # A model whose only convolution goes by Winograd binds no conv_general_dilated.
  monkeypatch.setitem(winograd.TILES, (10, 6), 4)
  conv = Conv(dict(kernel_size=(3, 3), padding='SAME', use_bias=False))
  program = jaxpr(conv, normal(2, 10, 10, 6))
  assert 'conv_general_dilated' not in str(program) and fast.one_at_a_time(program)
  monkeypatch.setattr(fast, 'PLATFORMS', ())
  assert not fast.one_at_a_time(jaxpr(cnn))


def _winograd_route(m, x, w, dy):
  y, vjp = jax.vjp(fast.tiled(x.shape[1:3], m), x, w)
  return (y, *vjp(dy))


@pytest.mark.parametrize('m, size', [(2, 8), (2, 9), (4, 8), (4, 10)])
def test_winograd_within_its_rounding_bound(m, size, monkeypatch):
  """F(m x m, 3 x 3) and its gradients against lax's in float64, elementwise: each term carries
  at most k roundings, so ``|fast - exact| <= gamma_k * (the route on |x|, |w|, |dy| with |B|,
  |G|, |A|)``, ``gamma_k = k u / (1 - k u)``. k: the Kronecker matrices' rounding (3), the
  input (a^2) and kernel (9) transforms, the channel sum, the output transform (a^2); for the
  kernel gradient the transposed transforms (m^2, a^2), kept tiles (a^2) and the tile sum.
  Sizes not divisible by m hang over; vmapped, the route runs per client."""
  n, c, o = 2, 5, 6
  x, w, dy = normal(n, size, size, c), normal(3, 3, c, o), normal(n, size, size, o)
  got = jax.jit(functools.partial(_winograd_route, m))(x, w, dy)
  twice = lambda v: jnp.stack([v, v])  # two clients, each its own copy
  mapped = jax.jit(jax.vmap(functools.partial(_winograd_route, m)))(twice(x), twice(w), twice(dy))
  with jax.enable_x64(True):
    f64 = lambda *vs: [jnp.asarray(v, jnp.float64) for v in vs]
    conv = lambda x, w: jax.lax.conv_general_dilated(
      x, w, (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')
    )
    y, vjp = jax.vjp(conv, *f64(x, w))
    exact = (y, *vjp(*f64(dy)))
    monkeypatch.setitem(
      winograd.TRANSFORMS, m, tuple(np.abs(np.asarray(t)) for t in winograd.TRANSFORMS[m])
    )
    forward, input_grad, kernel_grad, keep = winograd.parts((size, size), m)
    ax, aw, ady = f64(np.abs(x), np.abs(w), np.abs(dy))
    bound = (forward(ax, aw), input_grad(ady, aw), kernel_grad(keep(ax, aw)[1], ady))
  a = m + 2
  tiles = n * (-(-size // m)) ** 2
  k = 3 + 2 * a * a + 9 + max(c, o) + m * m + tiles
  u = EPS / 2
  gamma = k * u / (1 - k * u)
  for route in (got, [v[0] for v in mapped], [v[1] for v in mapped]):
    for fast32, want, b in zip(route, exact, bound, strict=True):
      error = np.abs(np.asarray(fast32, np.float64) - np.asarray(want))
      assert np.all(error <= gamma * np.asarray(b) * (1 + 1e-6)), (float(np.max(error / b)), gamma)


def test_winograd_where_its_tiles_were_measured_faster(monkeypatch):
  """Winograd exactly where winograd.TILES names the layer (ResNet-18's 3x3 stride-1 ones)."""
  route = lambda size, c, strides=(1, 1): winograd.tile(
    (size, size), (3, 3), strides, ((1, 1), (1, 1)), (1, 1), (c, c)
  )
  assert [route(s, c) for s, c in ((32, 64), (16, 128), (8, 256), (4, 512))] == [4, 4, 4, 2]
  assert route(16, 64, strides=(2, 2)) is None and route(28, 32) is None  # strided; the cnn's
  monkeypatch.setitem(winograd.TILES, (10, 6), 4)  # Conv's 6 features in and out
  calls = []
  tiled = fast.tiled
  monkeypatch.setattr(fast, 'tiled', lambda *a: calls.append(a) or tiled(*a))
  model = Conv(dict(kernel_size=(3, 3), padding='SAME', use_bias=False))
  x = normal(CLIENTS, 2, 10, 10, 6)
  params = client_params(model, x)
  jax.make_jaxpr(outputs_and_grads(fast_apply(model.apply)))(params, x)
  assert calls and set(calls) == {((10, 10), 4, None)}  # the output and its gradient
