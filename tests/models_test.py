"""The flax models: hand-computed parameter counts, input layouts, a NumPy forward pass.

Outputs and gradients of the CNN and ResNet-18 against float64: fast_test.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afl_jax import models
from afl_jax.models import count_params


def dense(i, o):
  return i * o + o


def conv(k, i, o, bias=True):
  return k * k * i * o + (o if bias else 0)


def resnet18_count(num_classes=10, in_ch=3):
  """CIFAR ResNet-18 by hand: bias-free convs, 2*C affine params per GroupNorm."""
  norm = lambda c: 2 * c
  total = conv(3, in_ch, 64, bias=False) + norm(64)  # stem
  in_c = 64
  for c in (64, 128, 256, 512):
    for _ in range(2):
      total += conv(3, in_c, c, False) + norm(c) + conv(3, c, c, False) + norm(c)
      if in_c != c:  # projection shortcut on the first block of stages 2-4
        total += conv(1, in_c, c, False) + norm(c)
      in_c = c
  return total + dense(512, num_classes)


def n_params(name, shape, num_classes=10, **kw):
  model = models.make(name, num_classes=num_classes, **kw)
  return count_params(jax.eval_shape(model.init, jax.random.key(0), jnp.zeros(shape)))


def numpy_params(model, x, seed=0):
  """``model.init``'s tree filled by NumPy (jax.random's initializers compile ~1 s a shape)."""
  rng = np.random.default_rng(seed)
  shapes = jax.eval_shape(model.init, jax.random.key(0), x)

  def fill(path, s):
    name = jax.tree_util.keystr(path)
    if len(s.shape) >= 2:
      fan_in = int(np.prod(s.shape[:-1]))
      return (rng.standard_normal(s.shape) / np.sqrt(fan_in)).astype(np.float32)
    return np.full(s.shape, 1.0 if 'scale' in name else 0.0, np.float32)

  return jax.tree_util.tree_map_with_path(fill, shapes)


def test_param_counts_match_hand_formulas():
  assert n_params('logreg', (1, 28, 28)) == dense(784, 10) == 7850
  assert n_params('mlp', (1, 784)) == dense(784, 200) + dense(200, 200) + dense(200, 10)
  assert n_params('mlp', (1, 784)) == 199210
  assert n_params('mlp', (1, 60), hidden_sizes=(50,)) == dense(60, 50) + dense(50, 10)
  cnn = conv(3, 1, 32) + conv(3, 32, 64) + conv(3, 64, 64) + dense(7 * 7 * 64, 128)
  cnn += dense(128, 10)
  assert n_params('cnn', (1, 28, 28, 1)) == cnn == 458570
  assert resnet18_count() == 11173962
  assert n_params('resnet18', (1, 32, 32, 3)) == resnet18_count()
  assert n_params('resnet18', (1, 32, 32, 3), num_classes=100) == resnet18_count(100)


@pytest.mark.parametrize('name', ['logreg', 'mlp', 'cnn'])
def test_image_input_layouts_agree(name):
  model = models.make(name, num_classes=10)
  x = jnp.asarray(np.random.default_rng(1).uniform(size=(3, 28, 28)), jnp.float32)
  params = numpy_params(model, x)
  out, out_nhwc, out_flat = jax.jit(
    lambda p: (model.apply(p, x), model.apply(p, x[..., None]), model.apply(p, x.reshape(3, -1)))
  )(params)
  assert out.shape == (3, 10)
  np.testing.assert_allclose(out_nhwc, out, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(out_flat, out, rtol=1e-6, atol=1e-6)
  assert not np.allclose(out[0], out[1])  # depends on the input


@pytest.mark.parametrize('name, settings', [('mlp', dict(hidden_sizes=(16, 8))), ('logreg', {})])
def test_dense_models_match_numpy_forward(name, settings):
  x = np.random.default_rng(4).normal(size=(5, 28, 28)).astype(np.float32)
  model = models.make(name, num_classes=10, **settings)
  params = numpy_params(model, x)
  layers = [params['params'][f'Dense_{i}'] for i in range(len(params['params']))]
  h = x.reshape(5, -1)
  for i, p in enumerate(layers):
    h = h @ p['kernel'] + p['bias']
    h = np.maximum(h, 0) if i < len(layers) - 1 else h
  assert len(layers) == len(settings.get('hidden_sizes', ())) + 1
  np.testing.assert_allclose(model.apply(params, x), h, rtol=1e-4, atol=1e-5)


def test_make_errors():
  with pytest.raises(ValueError, match=r"name='vgg'.*'cnn', 'logreg', 'mlp', 'resnet18'"):
    models.make('vgg', num_classes=10)
  model = models.make('cnn', num_classes=10)
  with pytest.raises(ValueError, match='flat input of width 100'):
    model.init(jax.random.key(0), jnp.zeros((2, 100)))
