"""One identity keys every reuse: after a finished run and sweep of a researcher's world (own
dataset module and helper, data file, trace, config file), each edit that changes numbers is
refused in one line naming it (--noresume then equals a fresh run); what changes none reuses."""

import json
import os
import shutil

import flax.linen as nn
import jax
import numpy as np
import pytest
from helper_runs import one_error_line, run_train

import afl_jax
from afl_jax.errors import UserError
from afl_jax.pipeline import build, loop, record, sweep
from afl_jax.pipeline import config as config_lib
from afl_jax.reproduction import records, runs, scoring, spec

MODULE = '''
import os
import numpy as np
import afl_jax
from afl_jax.pipeline import config as config_lib

helper = config_lib.import_beside(__file__, 'helper')


def npzdata(*, data_dir=None, download=False, seed=0):
  """Samples and labels from <data_dir>/data.npz (the first 150 train, the rest test)."""
  with np.load(os.path.join(data_dir, 'data.npz')) as f:
    x, y = f['x'] * helper.SCALE, f['y']
  return afl_jax.data.ArrayDataset(x[:150], y[:150], x[150:], y[150:], num_classes=3)


afl_jax.data.DATASETS.register('npzdata', npzdata, replace=True)  # each test's own copy
'''
HELPER = 'SCALE = 1.0\n'
CONFIG = """
import os
from afl_jax.pipeline import config as config_lib

HERE = os.path.dirname(os.path.abspath(__file__))
config_lib.import_beside(__file__, 'mydata')


def get_config(kind='single'):
  c = config_lib.default()
  c.dataset, c.data_dir, c.model = 'npzdata', os.path.join(HERE, 'data'), 'logreg'
  c.num_clients, c.partition, c.local_steps, c.batch_size = 4, 'iid', 2, 8
  c.schedule.kind, c.schedule.trace = 'trace', os.path.join(HERE, 'jobs.csv')
  c.schedule.buffer_size = 2
  config_lib.set_algorithm(c, 'fedbuff', client_lr=0.1, server_lr=1.0)
  c.num_rounds, c.eval_every, c.eval_train_samples = 4, 2, 50
  if kind == 'sweep':
    c.sweep = {'seed': [0, 1]}
  return c
"""


def make_world(where):
  os.makedirs(where / 'data')
  (where / 'mydata.py').write_text(MODULE)
  (where / 'helper.py').write_text(HELPER)
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 5)).astype(np.float32)
  np.savez(where / 'data' / 'data.npz', x=x, y=rng.integers(0, 3, 200))
  jobs = ''.join(f'{i % 4},{float(i)},{i + 1.5 + i % 3}\n' for i in range(10))
  (where / 'jobs.csv').write_text('client,start,finish\n' + jobs)
  (where / 'cfg.py').write_text(CONFIG)


def edit(world, what):
  """Change one input; returns a fragment the refusal must name."""
  if what == 'trace':
    text = (world / 'jobs.csv').read_text().replace('0,0.0,1.5', '0,0.0,3.75')
    (world / 'jobs.csv').write_text(text)
    return 'config.schedule.trace='
  if what == 'data':
    with np.load(world / 'data' / 'data.npz') as f:
      x, y = f['x'], f['y'].copy()
    y[0] = (y[0] + 1) % 3
    np.savez(world / 'data' / 'data.npz', x=x, y=y)
    return "the data (config.dataset='npzdata'"
  if what == 'module':
    text = (world / 'mydata.py').read_text().replace('num_classes=3', 'num_classes=1 + 2')
    (world / 'mydata.py').write_text(text)
    return 'the source of module mydata'
  if what == 'helper':
    (world / 'helper.py').write_text('SCALE = 2.0\n')
    return 'the source of module helper'
  if what == 'cosmetic':  # a comment, a docstring and the layout: no number changes
    text = (world / 'mydata.py').read_text().replace('(the first 150', '(first 150')
    (world / 'mydata.py').write_text('# edited\n' + text.replace(', seed=0)', ',\n    seed=0)'))
    return ''
  assert what == 'config'
  return 'config.hparams.client_lr 0.1 -> 0.2'


def train(world, kind, work, lr=None, **kw):
  c = config_lib.load_file(f'{world / "cfg.py"}:{kind}')
  if lr is not None:
    c.hparams.client_lr = lr
  logs = []
  (sweep.train_sweep if kind == 'sweep' else loop.train_and_evaluate)(
    c, str(work), log=logs.append, **kw
  )
  return logs


@pytest.fixture(scope='module')
def finished(tmp_path_factory):
  base = tmp_path_factory.mktemp('finished')
  make_world(base / 'world')
  for kind in ('single', 'sweep'):
    train(base / 'world', kind, base / kind)
  yield base
  afl_jax.data.DATASETS.unregister('npzdata')


def metrics(work):
  return {str(p.relative_to(work)): p.read_bytes() for p in work.rglob('metrics.jsonl')}


@pytest.mark.parametrize('what', ['trace', 'data', 'module', 'helper', 'config'])
@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_an_edited_input_is_refused_naming_it_and_noresume_equals_a_fresh_run(
  finished, tmp_path, kind, what
):
  world, work = tmp_path / 'world', tmp_path / kind
  shutil.copytree(finished / 'world', world)
  shutil.copytree(finished / kind, work)
  assert any('finished earlier' in line for line in train(world, kind, work))  # moved: reused
  lr = 0.2 if what == 'config' else None
  named = edit(world, what)
  with pytest.raises(UserError) as e:
    train(world, kind, work, lr)
  message = str(e.value)
  assert 'holds a run of other inputs' in message and named in message and '\n' not in message
  if kind == 'sweep' and what in ('data', 'config'):  # the whole rerun, for two of the cases
    train(world, kind, work, lr, resume=False)
    train(world, kind, tmp_path / 'fresh', lr)
    assert metrics(work) == metrics(tmp_path / 'fresh')


def test_what_changes_no_number_reuses_the_run_and_the_device_count_does_not(finished, tmp_path):
  world, work = tmp_path / 'world', tmp_path / 'single'
  shutil.copytree(finished / 'world', world)
  shutil.copytree(finished / 'single', work)
  shutil.move(world / 'data', tmp_path / 'elsewhere')  # the same files at another path
  edit(world, 'cosmetic')
  c = config_lib.load_file(f'{world / "cfg.py"}:single')
  c.data_dir, c.checkpoint_every = str(tmp_path / 'elsewhere'), 2
  logs = []
  loop.train_and_evaluate(c, str(work), log=logs.append)
  assert any('finished earlier' in line for line in logs), logs
  had = json.loads((work / 'config.json').read_text())['identity']['engine']['devices']
  devices = {'AFL_JAX_CPU_DEVICES': str(3 - had), 'XLA_FLAGS': ''}  # 1 <-> 2
  flag = f'--config={world / "cfg.py"}:single'
  rc_out = run_train(work, flag, f'--config.data_dir={tmp_path / "elsewhere"}', **devices)
  one_error_line(*rc_out, f'devices {had} -> {3 - had}')


def test_the_identity_is_one_function_of_the_built_run(tmp_path):
  make_world(tmp_path)
  c = config_lib.load_file(f'{tmp_path / "cfg.py"}:single')
  run = build.build_run(c)
  assert build.built_identity(c) == run.identity  # data and schedule alone give the same
  assert list(run.identity['code']) == ['helper', 'mydata']
  assert run.identity['sources']['trace'] == record.file_digest(str(tmp_path / 'jobs.csv'))
  c.stop_after_steps, c.checkpoint_every, c.target_accuracy = 2, 2, 0.5  # observe, not compute
  assert build.built_identity(c) == run.identity
  c.eval_every = 1  # the records it writes
  assert build.built_identity(c)['digest'] != run.identity['digest']
  saved = json.loads(json.dumps(run.identity))
  assert record.changes(saved, build.built_identity(c), run.config, config_lib.resolve(c)) == (
    'config.eval_every 2 -> 1'
  )


def test_a_reproduction_reruns_exactly_the_sweeps_whose_inputs_changed(tmp_path):
  make_world(tmp_path)
  grid = {'hparams.client_lr': (0.1,)}
  method = spec.Method('A', f'{tmp_path / "cfg"}:single', grid)
  exp = spec.Experiment('e', 't', 'r', 's', base=lambda c: None, methods=(method,))
  paper = spec.Paper('own', '0', 'c', 's', (exp,))
  logs, out = [], str(tmp_path / 'runs')
  phase = lambda: runs.run_phase(
    paper, exp, 'select', out, records_dir=str(tmp_path / 'rec'), log=logs.append, mark=scoring.mark
  )
  phase()
  first, sweeps = runs.read('own', str(tmp_path / 'rec'))
  assert sweeps[0]['identity'] == records.sweep_identity(first.run) and first.run.nunique() == 3
  logs.clear()
  phase()
  assert any('records up to date' in line for line in logs), logs
  edit(tmp_path, 'data')
  logs.clear()
  phase()
  assert any("its runs' inputs changed" in line for line in logs), logs
  again, _ = runs.read('own', str(tmp_path / 'rec'))
  assert set(again.run).isdisjoint(first.run) and len(again) == len(first)


def test_a_sweeps_identity_follows_a_component_registered_anew():
  """Remembered within one command, but a component registered anew gives the new identity."""

  def tiny(num_classes: int = 10, width: int = 4):
    return nn.Dense(num_classes)

  c = config_lib.default()
  c.model = 'tiny_digest'
  c.num_clients, c.train_subset, c.num_rounds = 4, 200, 2
  c.schedule.concurrency, c.schedule.buffer_size = 2, 1
  c.sweep = {'seed': [0, 1]}
  afl_jax.models.MODELS.register('tiny_digest', tiny, replace=True)
  try:
    with runs.remembering():
      first = runs.sweep_identity(c)
      assert runs.sweep_identity(c) == first

      def wider(num_classes: int = 10, width: int = 8):
        return nn.Dense(num_classes)

      afl_jax.models.MODELS.register('tiny_digest', wider, replace=True)
      assert runs.sweep_identity(c) != first
  finally:
    afl_jax.models.MODELS.unregister('tiny_digest')


def test_jax_random_configuration_is_part_of_the_identity(finished, tmp_path):
  """A run end to end (every setting's naming: the test below)."""
  world, work = tmp_path / 'world', tmp_path / 'single'
  shutil.copytree(finished / 'world', world)
  shutil.copytree(finished / 'single', work)
  before = jax.config.jax_threefry_partitionable
  jax.config.update('jax_threefry_partitionable', not before)
  try:
    said = r'jax_threefry_partitionable .*\$JAX_THREEFRY_PARTITIONABLE'
    with pytest.raises(UserError, match=said):
      train(world, 'single', work)
    train(world, 'single', work, resume=False)
    train(world, 'single', tmp_path / 'fresh')
    assert metrics(work) == metrics(tmp_path / 'fresh') != metrics(finished / 'single')
  finally:
    jax.config.update('jax_threefry_partitionable', before)


def test_a_run_is_reused_only_by_the_program_that_computed_it(finished, tmp_path):
  """A sweep's run and the single run of its config (one identity, not one program) reuse
  neither the other's records, nor does a grid extended by a seed."""
  world = tmp_path / 'world'
  shutil.copytree(finished / 'world', world)
  shutil.copytree(finished / 'sweep', tmp_path / 'sweep')
  with pytest.raises(UserError, match=r"program \(a sweep's group of 2 run\(s\) -> a single run\)"):
    train(world, 'single', tmp_path / 'sweep' / 'seed=0')
  shutil.copytree(finished / 'single', tmp_path / 'mixed' / 'seed=0')
  with pytest.raises(UserError, match=r"program \(a single run -> a sweep's group of 2 run\(s\)\)"):
    train(world, 'sweep', tmp_path / 'mixed')

  def wider(work, **kw):
    c = config_lib.load_file(f'{world / "cfg.py"}:sweep')
    c.sweep = {'seed': [0, 1, 2]}
    return sweep.train_sweep(c, str(work), log=lambda *_: None, **kw)

  with pytest.raises(UserError, match=r"group of 2 run\(s\) -> a sweep's group of 3 run\(s\)"):
    wider(tmp_path / 'sweep')
  wider(tmp_path / 'sweep', resume=False)
  wider(tmp_path / 'fresh')
  assert metrics(tmp_path / 'sweep') == metrics(tmp_path / 'fresh')


SAME = {'config': None, 'data': None, 'schedule': None}  # identity items left alone
# A value other than the default of each JAX setting in the identity, in their order.
OTHER = ['rbg', False, 3, True, True, 'highest', 'strict', True, True, False, True, True]


def test_every_jax_setting_and_xla_flag_that_changes_numbers_is_in_the_identity(monkeypatch):
  base = record.jax_facts()
  for name, value in zip(record.JAX_SETTINGS, OTHER, strict=True):
    before = base[name]
    jax.config.update(name, value)
    try:
      facts = record.jax_facts()
    finally:
      jax.config.update(name, before)
    assert facts[name] != base[name] and {k for k in facts if facts[k] != base[k]} == {name}
    named = record.changes(
      {'jax': base} | SAME, {'code': {}, 'engine': {}, 'jax': facts} | SAME, {}, {}
    )
    assert named.startswith(f'{name} ') and f'${name.upper()}' in named, named
  monkeypatch.setenv('XLA_FLAGS', '--xla_force_host_platform_device_count=7')
  assert record.jax_facts() == base  # the device count is the engine's
  monkeypatch.setenv('XLA_FLAGS', '--xla_cpu_enable_fast_math=true')
  assert record.jax_facts()['XLA_FLAGS'] == '--xla_cpu_enable_fast_math=true'
