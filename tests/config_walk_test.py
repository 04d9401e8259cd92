"""The config's path from what scripts/train.py calls, read statically (tests/config_walk.py).

Issue 32: following the config from the function train.py calls, at most 10 modules, no
climb back up to a higher layer, each setting checked in one place. ``python
tests/config_walk.py`` prints the figures, the path and every range check on it.
"""

import ast
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import config_walk  # noqa: E402

MAX_MODULES = 10
# The one module that checks the config's values against their declared ranges.
VALIDATION = 'afl_jax.pipeline.config'


@pytest.fixture(scope='module')
def found():
  return config_walk.walks()


def test_the_walk_starts_where_train_py_hands_over_the_config():
  roots = config_walk.roots(config_walk.Walker())
  assert roots == [
    ('afl_jax.pipeline.cli', 'finish_config', 'config'),
    ('afl_jax.pipeline.sweep', 'train_sweep', 'config'),
    ('afl_jax.pipeline.loop', 'train_and_evaluate', 'config'),
  ]


def test_at_most_ten_modules_and_no_climb_back_up(found):
  both = config_walk.joined(found)
  for name, walk in {**found, 'all': both}.items():
    figures = walk.figures()
    print(name, figures)
    assert figures['modules'] <= MAX_MODULES, (name, walk.modules)
    assert not walk.climbs, (name, walk.climbs)
  # The walk reaches what it must: the build, the validation, the checkpoint's fingerprint.
  assert {'afl_jax.pipeline.build', VALIDATION, 'afl_jax.pipeline.checkpoint'} <= set(both.modules)


def test_components_receive_plain_values_not_the_config(found):
  """No component (algorithms, schedules, data, models, ...) nor the core gets the config."""
  below = config_walk.layer('afl_jax.algorithms')
  for name, walk in found.items():
    assert [m for m in walk.modules if config_walk.layer(m) >= below] == [], name


def test_each_setting_checked_in_one_place(found):
  """Every range check handed a value of the config sits in the validation module, and a
  built run is resolved and validated once."""
  for name, walk in found.items():
    outside = sorted({c for c in walk.checks if c[0] != VALIDATION})
    assert outside == [], (name, outside)
    assert walk.count(f'{VALIDATION}.validate') == walk.count('afl_jax.pipeline.build.build_run')
  for name in ('afl_jax.pipeline.loop.train_and_evaluate', 'afl_jax.pipeline.sweep.train_sweep'):
    walk = found[name]
    assert walk.checks, name  # the walk sees the checks (a walk that found none proves nothing)
    assert walk.count('afl_jax.pipeline.build.build_run') >= 1, name
  single = found['afl_jax.pipeline.loop.train_and_evaluate']
  assert single.count(f'{VALIDATION}.resolve') == 1


# ---- the walk itself, on a made-up package: each measure can fail -------------------------
FAKE = {
  'afl_jax.pipeline.config': """
import ml_collections
from afl_jax import schedules

def default() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.schedule = ml_collections.ConfigDict()
  return c

def resolve(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(c.to_dict())
""",
  'afl_jax.pipeline.loop': """
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline.build import build_run

def train_and_evaluate(config, workdir):
  run = build_run(config)
  return summarize(run)

def summarize(run):
  return run.config.num_rounds
""",
  'afl_jax.pipeline.build': """
import dataclasses
import ml_collections
from afl_jax import schedules
from afl_jax.pipeline import config as config_lib

@dataclasses.dataclass
class Run:
  config: ml_collections.ConfigDict

def build_run(config) -> Run:
  c = config_lib.resolve(config)
  schedules.make(c.schedule)          # a section handed to a component
  schedules.check(c.num_clients)      # a value handed to a range check outside validation
  return Run(config=c)
""",
  'afl_jax.schedules': """
from afl_jax.registry import Registry
from afl_jax.pipeline import config as config_lib

SCHEDULES = Registry()

def make(section):
  return config_lib.resolve(section)  # climbs back up

def check(n):
  return SCHEDULES.bind('kind', {'n': n})
""",
  'afl_jax.registry': """
class Registry:
  def bind(self, name, settings):
    return settings
""",
}


def _fake_modules():
  out = {}
  for name, source in FAKE.items():
    tree = ast.parse(source)
    names = {}
    for node in tree.body:
      if isinstance(node, ast.FunctionDef | ast.ClassDef):
        names[node.name] = node
      elif isinstance(node, ast.Assign):
        names.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
    imports = config_walk._imports(
      [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)], name, False
    )
    out[name] = config_walk.Module(name, name, tree, False, names, imports)
  return out


def test_the_walk_counts_what_it_should_on_a_made_up_package():
  walker = config_walk.Walker(_fake_modules())
  assert walker.sections == {'schedule'}
  walk = walker.walk('afl_jax.pipeline.loop', 'train_and_evaluate', 'config')
  # loop > build > config > build > schedules > config > schedules > build > loop (the
  # carrier run's config read in summarize, same module)
  assert walk.stays == [
    'afl_jax.pipeline.loop',
    'afl_jax.pipeline.build',
    'afl_jax.pipeline.config',
    'afl_jax.pipeline.build',
    'afl_jax.schedules',
    'afl_jax.pipeline.config',
    'afl_jax.schedules',
    'afl_jax.pipeline.build',
    'afl_jax.pipeline.loop',
  ]
  assert walk.figures() == {'modules': 4, 'stays': 9, 'climbs': 1, 'returns': 5}
  assert walk.climbs == [('afl_jax.schedules', 'afl_jax.pipeline.config', 'afl_jax.schedules.make')]
  assert [(m, f, what) for m, f, _, what in walk.checks] == [
    ('afl_jax.pipeline.build', 'build_run', 'schedules.check')
  ]
  assert walk.count('afl_jax.pipeline.config.resolve') == 2
