"""Own code in a run's identity: every form of factory reaches its modules and their imports,
digested so that only a code edit changes a digest (its module's); a source that cannot be
read is one line."""

import functools
import importlib
import sys

import ml_collections
import numpy as np
import optax
import pytest

import afl_jax
from afl_jax.pipeline import build, own_code, record
from afl_jax.pipeline import config as config_lib

INIT = 'from . import models\n'
MODELS = '''
"""Models of the test's own package."""
import functools
from .consts import WIDTH


def make(width=WIDTH):
  """A factory."""
  return ('model', width)


class Tiny:
  def __init__(self, width=WIDTH):
    self.width = width


class Maker:
  def build(self):
    return make()

  def __call__(self):
    return make()


def outer():
  scale = 2

  def inner():
    return make(WIDTH * scale)

  return inner


LAMBDA = lambda: make()  # noqa: E731
PARTIAL = functools.partial(make, width=3)
'''
CONSTS = 'WIDTH = 4  # the width\n'
OWN = ['ownpkg', 'ownpkg.consts', 'ownpkg.models']


@pytest.fixture
def pkg(tmp_path, monkeypatch):
  root = tmp_path / 'ownpkg'
  root.mkdir()
  (root / '__init__.py').write_text(INIT)
  (root / 'models.py').write_text(MODELS)
  (root / 'consts.py').write_text(CONSTS)
  monkeypatch.syspath_prepend(str(tmp_path))
  importlib.invalidate_caches()
  module = importlib.import_module('ownpkg.models')
  yield root, module
  for name in [n for n in sys.modules if n == 'ownpkg' or n.startswith('ownpkg.')]:
    del sys.modules[name]


def forms(m):
  return {
    'function': m.make,
    'partial': m.PARTIAL,
    'class': m.Tiny,
    'closure': m.outer(),
    'lambda': m.LAMBDA,
    'bound method': m.Maker().build,
    'callable object': m.Maker(),
    'partial of a library function': functools.partial(optax.sgd, m.make),
  }


def test_every_form_of_factory_reaches_its_module_and_what_it_imports(pkg):
  root, m = pkg
  before = {}
  for form, f in forms(m).items():
    before[form] = own_code.digests([(form, f)])
    assert [k for k in before[form] if not k.startswith(own_code.HELD)] == OWN, form
  assert own_code.digests([('an installed one', optax.sgd), ('afl_jax', build.build_run)]) == {}
  # A comment, a docstring and another layout change no digest; a code edit only its module's.
  (root / 'consts.py').write_text('# edited\nWIDTH = 4\n')
  text = MODELS.replace('"""A factory."""', '"""Another docstring."""').replace(
    "return ('model', width)", "return (\n    'model',\n    width,\n  )"
  )
  (root / 'models.py').write_text(text)
  assert own_code.digests([('f', m.make)]) == before['function']
  (root / 'consts.py').write_text('WIDTH = 5\n')
  after = own_code.digests([('f', m.make)])
  assert [k for k in OWN if after[k] != before['function'][k]] == ['ownpkg.consts']


def test_a_source_that_cannot_be_read_is_one_line():
  space = {}
  exec('def made(): return 1', space)  # noqa: S102 (no file behind it)
  with pytest.raises(own_code.SourceError) as e:
    own_code.digests([("model 'made'", space['made'])])
  assert "model 'made'" in str(e.value) and '<string>' in str(e.value)
  assert '\n' not in str(e.value)


def test_a_run_digests_its_registered_components_and_the_callables_of_its_config(pkg):
  _, m = pkg
  afl_jax.models.MODELS.register('own_partial_model', m.PARTIAL, replace=True)
  try:
    c = config_lib.default()
    c.model = 'own_partial_model'
    c.hparams = ml_collections.ConfigDict({'client_lr': m.LAMBDA})  # one's own schedule
    found = dict(build.components(c))
    assert found["model 'own_partial_model'"] is m.PARTIAL
    assert found['config.hparams.client_lr'] is m.LAMBDA
    assert list(own_code.digests(build.components(c))) == [
      f"{own_code.HELD}model 'own_partial_model'",  # its width=3
      *OWN,
    ]
  finally:
    afl_jax.models.MODELS.unregister('own_partial_model')


def test_the_values_a_partial_or_a_closure_holds_are_digested(pkg):
  """What is in no signature nor source is digested beside the modules, named when changed."""
  _, m = pkg

  def held(f):
    return own_code.digests([('model f', f)]).get(f'{own_code.HELD}model f')

  for make in (
    lambda v: functools.partial(m.make, v),  # positional: not in the signature
    lambda v: functools.partial(m.make, width=v),
    lambda v: functools.partial(optax.sgd, v),  # a library's function: its module is not own
    lambda v: functools.partial(m.make, np.full(3, v)),  # an array
    lambda v: optax.cosine_decay_schedule(v, 100),  # a library's closure in the config
  ):
    assert held(make(3)) == held(make(3)) is not None
    assert held(make(3)) != held(make(4))
  assert held(m.outer()) is not None  # the closure's scale
  assert held(m.make) is None and held(m.Tiny) is None and held(m.Maker()) is None
  old = {'code': own_code.digests([('model f', functools.partial(m.make, 3))])}
  new = {'code': own_code.digests([('model f', functools.partial(m.make, 4))])}
  ident = dict(config='c', data='d', schedule='s', engine={}, jax={})
  assert record.changes(old | ident, new | ident, {}, {}) == 'the values model f holds'
  with pytest.raises(own_code.SourceError, match=r'^model f holds a .* cannot be digested'):
    own_code.digests([('model f', functools.partial(m.make, object()))])


def test_afl_jax_components_digest_to_nothing():
  from afl_jax import algorithms, compression, data, models, schedules

  registries = (algorithms.ALGORITHMS, schedules.SCHEDULES, schedules.DISTRIBUTIONS)
  registries += (compression.COMPRESSORS, data.DATASETS, models.MODELS)
  found = [(f'{r.kind} {n!r}', r.factory(n)) for r in registries for n in r]
  assert len(found) > 40
  assert own_code.digests(found) == {}
  assert own_code.digests(build.components(config_lib.default())) == {}
