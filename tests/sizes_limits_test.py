"""Sizes are checked before compute, each refusal one line naming the field: a local step's
batch and activations (the closed form of a linear least-squares loss), K, the run's time
(a long one warned), schedule files by their .npy headers, and sweeps in estimate.py."""

import io
import os
import pathlib
import struct
import subprocess
import sys
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helper_runs import one_error_line, run_train

import afl_jax
from afl_jax.core import memory
from afl_jax.errors import ConfigError
from afl_jax.pipeline import build, sizes
from afl_jax.schedules import schedule as schedule_lib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMOKE = str(ROOT / 'configs' / 'digits_smoke.py')


def _linear_problem(batch, dim):
  x = jnp.zeros((3, 50, dim))
  y = jnp.zeros((3, 50))
  loss = lambda w, b: jnp.mean((b[0] @ w - b[1]) ** 2)
  return afl_jax.problems.from_loss(loss, (x, y), full_batch=False, batch_size=batch)


def test_client_step_bytes_grow_by_the_closed_form_per_example():
  dim = 7
  w = jax.ShapeDtypeStruct((dim,), jnp.float32)
  one = memory.client_step_bytes(_linear_problem(10, dim), w)
  two = memory.client_step_bytes(_linear_problem(30, dim), w)
  # Per example: its row x (dim floats) and y, then x @ w, the residual and its square.
  assert (two - one) / 20 == 4 * (dim + 1) + 3 * 4


def test_a_problem_stacked_over_replicas_counts_one_clients_batch():
  w = jax.ShapeDtypeStruct((7,), jnp.float32)
  one = _linear_problem(10, 7)
  other = one.replace(client_views=jax.tree.map(lambda a: a + 1, one.client_views))
  stacked, axes = afl_jax.core.simulator.stack_problems([one, other])
  assert memory.client_step_bytes(stacked, w, axes) == memory.client_step_bytes(one, w) > 0


def test_the_engine_plan_counts_each_trained_clients_batch():
  problem = _linear_problem(1000, 7)
  w = jax.ShapeDtypeStruct((7,), jnp.float32)
  per = memory.client_step_bytes(problem, w)
  schedule = afl_jax.schedules.from_arrays([[0, 1, 2]] * 2, [[0, 0, 0]] * 2, local_steps=2)
  alg = afl_jax.algorithms.make('fedbuff', client_lr=0.1)
  sim = afl_jax.core.simulator.Simulator(alg, problem, schedule, memory_limit_bytes=1)
  with pytest.raises(memory.InsufficientMemoryError, match='batch activations'):
    sim.init(jnp.zeros(7), jax.random.key(0))
  assert sim.memory['batch_activations'] == sim.block_size * per > 0


@pytest.fixture(scope='module')
def smoke_run():
  return build.build_run(build.config_lib.resolve(build.config_lib.load_file(SMOKE)))


def _sim(run, schedule=None):
  return afl_jax.core.simulator.Simulator(run.algorithm, run.problem, schedule or run.schedule)


def test_work_is_six_flops_per_param_per_example_over_the_arrivals_local_steps(smoke_run):
  r = smoke_run
  report = sizes.work(r.work_fields, _sim(r), r.params0)
  steps = int(np.asarray(r.schedule.local_steps)[np.asarray(r.schedule.mask)].sum())
  params = sum(int(np.size(x)) for x in jax.tree.leaves(r.params0))
  assert report['client_steps'] == steps
  assert report['flops'] == 6.0 * params * r.config.batch_size * steps
  assert report['seconds'] == report['flops'] / sizes.ASSUMED_FLOPS['cpu']


def test_a_step_that_cannot_fit_names_batch_size_or_the_local_steps(smoke_run):
  r = smoke_run
  args = (r.work_fields, _sim(r), r.params0)
  need = sizes.work(*args)['step_bytes']
  sizes.check_work(*args, limit_bytes=2 * need)
  with pytest.raises(ConfigError, match=r'^config\.batch_size=16 is invalid: the local loop of'):
    sizes.check_work(*args, limit_bytes=need)
  long_k = afl_jax.schedules.from_arrays(
    np.asarray(r.schedule.client_ids), np.asarray(r.schedule.start_step), local_steps=10**8,
    num_clients=r.schedule.num_clients,
  )  # fmt: skip
  with pytest.raises(ConfigError, match=r'^config\.local_steps=5 is invalid: .*K up to 100,0'):
    sizes.check_work(r.work_fields, _sim(r, long_k), r.params0, limit_bytes=10**9)


def test_time_above_the_limit_is_refused_and_a_long_run_warned(smoke_run, monkeypatch):
  r = smoke_run
  args = (r.work_fields, _sim(r), r.params0)
  hours = sizes.work(*args)['seconds'] / 3600
  monkeypatch.setenv(sizes.MAX_HOURS_ENV, str(hours / 2))
  with pytest.raises(ConfigError, match=r'above the limit of .* h \(\$AFL_JAX_MAX_HOURS\)'):
    sizes.check_work(*args)
  monkeypatch.setenv(sizes.MAX_HOURS_ENV, 'soon')
  with pytest.raises(ConfigError, match=r"^\$AFL_JAX_MAX_HOURS='soon' is invalid"):
    sizes.check_work(*args)
  monkeypatch.delenv(sizes.MAX_HOURS_ENV)
  monkeypatch.setattr(sizes, 'WARN_HOURS', hours / 2)
  lines = []
  sizes.check_work(*args, log=lines.append)
  sizes.check_work(*args, log=lines.append)  # said once
  assert len(lines) == 1 and lines[0].startswith('warning: config.')


def test_train_refuses_absurd_sizes_before_compiling(tmp_path):
  for field, fragment in (
    ('batch_size=2147483647', 'config.batch_size=2147483647 is invalid: the local loop'),
    ('local_steps=2147483647', 'config.local_steps=2147483647 is invalid:'),
    ('local_epochs=1000000', 'config.local_epochs=1000000 is invalid: 606,000,000 client steps'),
  ):
    rc, out = run_train(
      tmp_path / 'w', f'--config={SMOKE}', f'--config.{field}', timeout=180,
      AFL_JAX_CPU_DEVICES='1',
    )  # fmt: skip
    one_error_line(rc, out, fragment)
    assert 'RESOURCE_EXHAUSTED' not in out and not (tmp_path / 'w').exists()


def test_a_schedule_file_is_sized_from_its_headers_before_expanding(tmp_path, monkeypatch):
  # client_ids' .npy header claims (10**9, 10) int32 over 64 bytes of data.
  header = repr({'descr': '<i4', 'fortran_order': False, 'shape': (10**9, 10)}).encode()
  header += b' ' * (-(10 + len(header) + 1) % 64) + b'\n'
  npy = b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header + b'\0' * 64
  buf = io.BytesIO()
  np.save(buf, np.int32(3))
  path = tmp_path / 'big.npz'
  with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('client_ids.npy', npy)
    z.writestr('num_clients.npy', buf.getvalue())
  monkeypatch.setattr(np, 'load', lambda *a, **k: pytest.fail('expanded before the check'))
  with pytest.raises(schedule_lib.ScheduleError) as info:
    afl_jax.schedules.load(path)
  assert str(info.value) == (
    f"cannot read schedule file {path}: array 'client_ids' has shape (1000000000, 10) "
    '(10,000,000,000 entries, 38,147 MiB expanded), above the limit of 20,000,000 arrival '
    'slots of a schedule; nothing was expanded.'
  )


def test_a_schedule_file_holding_an_npy_or_garbage_is_one_error(tmp_path):
  npy = tmp_path / 'sched.npz'
  with open(npy, 'wb') as f:
    np.save(f, np.zeros((3, 2), np.int32))
  with pytest.raises(schedule_lib.ScheduleError, match=r'not an \.npz archive written by'):
    afl_jax.schedules.load(npy)
  bad = tmp_path / 'bad.npz'
  with zipfile.ZipFile(bad, 'w') as z:
    z.writestr('client_ids.npy', b'not an array')
  with pytest.raises(schedule_lib.ScheduleError, match="array 'client_ids' is not a readable"):
    afl_jax.schedules.load(bad)
  ok = tmp_path / 'ok.npz'
  s = afl_jax.schedules.from_arrays([[0, 1], [2, 0]], [[0, 0], [1, 1]], local_steps=3)
  s.save(ok)
  back = afl_jax.schedules.load(ok)
  assert np.array_equal(back.client_ids, s.client_ids) and back.num_clients == s.num_clients


def _estimate(*args):
  """scripts/estimate.py's output lines (exit status 0, no traceback)."""
  proc = subprocess.run(
    [sys.executable, str(ROOT / 'scripts' / 'estimate.py'), *args, '--probe_steps=1'],
    capture_output=True, text=True, timeout=300,
    env=dict(os.environ, JAX_PLATFORMS='cpu', AFL_JAX_CPU_DEVICES='1'),
  )  # fmt: skip
  assert proc.returncode == 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
  return proc.stdout.strip().splitlines()


def test_estimate_covers_every_grid_point_of_a_sweep(tmp_path):
  cfg = tmp_path / 'sweep_cfg.py'
  cfg.write_text(
    'import ml_collections\nfrom afl_jax.pipeline import config\n'
    f'def get_config():\n  c = config.load_file({SMOKE!r})\n'
    "  c.sweep = ml_collections.ConfigDict({'hparams': {'client_lr': [0.05, 0.1]}, "
    "'local_steps': [5, 7]})\n  return c\n"
  )
  lines = _estimate(f'--config={cfg}')
  assert lines[0].startswith('sweep: 4 grid points of fedbuff on digits (2 hparams.client_lr, 2')
  points = [line.strip().split(':')[0] for line in lines[1:5]]
  assert points == [f'client_lr={lr},local_steps={k}' for lr in (0.05, 0.1) for k in (5, 7)]
  steps = [
    int(line.split('client steps ')[1].split(' ')[0].replace(',', '')) for line in lines[1:5]
  ]
  assert steps[1] * 5 == steps[0] * 7 and steps[0] == steps[2]  # K scales the useful steps
  assert lines[5].startswith(f'total: {sum(steps):,} useful')


@pytest.mark.parametrize(
  'field,said',
  [
    ('local_epochs=1000000', 'local_epochs=1000000 is invalid: 606,000,000 client'),
    ('batch_size=100000000', 'batch_size=100000000 is invalid: the local loop of'),  # not probed
  ],
)
def test_estimate_names_what_train_would_refuse_instead_of_refusing(field, said):
  last = _estimate(f'--config={SMOKE}', f'--config.{field}')[-1]
  assert last.startswith(f'train.py would refuse this run: config.{said}'), last


def test_build_run_plans_the_engine_and_refuses_its_memory_naming_a_field(smoke_run):
  r = smoke_run
  assert r.sim is not None and r.refusal is None and r.work['client_steps'] > 0
  assert r.memory == r.sim.estimate(r.params0, r.key) and r.memory['total'] > 0
  limit = r.memory['total']  # 90% of it usable: the run does not fit
  with pytest.raises(ConfigError, match=r'^config\.[\w.]+=.* is invalid: this run needs about'):
    build.plan(r, memory_limit_bytes=limit)
  kept = build.plan(r, memory_limit_bytes=limit, strict=False)
  assert kept.refusal.startswith('config.') and kept.memory == r.memory


def test_build_run_builds_on_a_given_dataset_without_reading_the_files(smoke_run, monkeypatch):
  c = smoke_run.config
  ds = build.load_dataset(c)
  given = ds._replace(train_y=(ds.train_y + 1) % ds.num_classes)
  monkeypatch.setattr(build.data, 'make', lambda *a, **k: pytest.fail('the files were read'))
  run = build.build_run(c, dataset=given)
  assert run.identity['data'] != smoke_run.identity['data']  # built on the given labels
  assert np.array_equal(run.data.y, (smoke_run.data.y + 1) % ds.num_classes)
