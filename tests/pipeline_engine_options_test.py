"""Engine options as config fields: the defaults give the engine what it had before; set
values reach a single run's and a sweep's Simulator. Bad values: experiment_test.INVALID."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from configs_test import SPECS

from afl_jax.core import precision
from afl_jax.errors import ConfigError
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import sweep
from afl_jax.pipeline.build import build_run, engine_options


def _config(**fields):
  c = config_lib.default()
  c.dataset, c.model, c.num_clients, c.partition = 'digits', 'logreg', 6, 'dirichlet'
  c.local_epochs, c.batch_size, c.num_rounds, c.eval_every = 1, 64, 4, 2
  c.schedule.kind, c.schedule.concurrency, c.schedule.buffer_size = 'fedbuff', 4, 2
  for k, v in fields.items():
    c[k] = v
  return config_lib.resolve(c)


def test_defaults_are_the_engines_defaults():
  c = config_lib.default()
  config_lib.validate_fields(c)
  none = dict(compute_dtype=None, client_block_size=None)
  assert engine_options(c) == dict(local_step_buckets=None, **none)
  # sweeps keep the padded path they have always taken (results unchanged)
  assert sweep._padded(engine_options(c)) == dict(local_step_buckets=0, **none)
  c.local_step_buckets, c.compute_dtype, c.client_block_size = 0, 'bfloat16', 8
  assert engine_options(c) == dict(
    local_step_buckets=0, compute_dtype=jnp.bfloat16, client_block_size=8
  )


def test_fields_reach_the_simulator_of_a_run():
  run = build_run(_config())
  assert len(set(run.local_steps.tolist())) > 1  # K differs: grouping matters
  auto = run.sim
  padded = build_run(_config(local_step_buckets=0)).sim
  three = build_run(_config(local_step_buckets=3)).sim
  assert not padded.adaptive_steps and padded.block_size == padded.num_slots
  assert three.adaptive_steps and three.num_slots == 3 * three.block_size
  assert auto.adaptive_steps == (auto.step_work[1] < padded.step_work[1])
  low = build_run(_config(compute_dtype='bfloat16')).sim
  key = jax.random.key(0)
  outs = []
  for sim in (padded, three, low):
    state = sim.init(run.params0, key)
    state, _ = sim.run_chunk(state, key)
    outs.append(np.asarray(jax.tree.leaves(sim.params(state))[0]))
  np.testing.assert_allclose(outs[1], outs[0], rtol=0, atol=1e-5)  # grouping: same run
  assert outs[2].dtype == np.float32  # bf16 compute, float32 state
  assert 0 < np.max(np.abs(outs[2] - outs[0])) < 0.05  # bf16 round-off, same run


@pytest.mark.parametrize('spec', SPECS, ids=lambda s: s.rsplit('/', 1)[-1])
def test_config_files_keep_their_engine_behaviour(spec):
  """Shipped configs leave both fields at the defaults: their runs are unchanged."""
  c = config_lib.load_file(spec)
  assert (c.local_step_buckets, c.compute_dtype) == (-1, 'dtype')


def test_sweep_from_a_config_passes_the_engine_options(tmp_path, monkeypatch):
  """A sweep's group gets the config's options: its Simulator groups K in 2 blocks and its
  clients compute in bfloat16."""
  seen, sims, dtypes = [], [], []
  real, real_dtype = sweep.sweep_simulator, precision.with_compute_dtype

  def spy(*args, **kwargs):
    seen.append({k: kwargs[k] for k in ('local_step_buckets', 'compute_dtype')})
    sims.append(real(*args, **kwargs))
    return sims[-1]

  monkeypatch.setattr(sweep, 'sweep_simulator', spy)
  monkeypatch.setattr(
    precision, 'with_compute_dtype', lambda c, d: dtypes.append(d) or real_dtype(c, d)
  )
  c = _config(local_step_buckets=2, compute_dtype='bfloat16')
  c.sweep = {'hparams': {'client_lr': [0.05, 0.1]}}
  summary = sweep.train_sweep(c, str(tmp_path), log=lambda *a: None)
  assert seen == [{'local_step_buckets': 2, 'compute_dtype': jnp.bfloat16}]
  assert sims[0].adaptive_steps and sims[0].num_slots == 2 * sims[0].block_size
  assert dtypes and all(d == jnp.bfloat16 for d in dtypes)
  assert len(summary['runs']) == 2


def test_a_sweep_refuses_buckets_with_client_blocks_in_the_single_runs_one_line(tmp_path):
  """The engine's check is the one check: a sweep's group meets it as a single run does."""
  c = _config(local_step_buckets=2, client_block_size=4)
  c.sweep = {'hparams': {'client_lr': [0.05, 0.1]}}
  with pytest.raises(
    ConfigError,
    match=r'^config.local_step_buckets=2 is invalid: must be -1 or 0 with client_block_size=4',
  ) as info:
    sweep.train_sweep(c, str(tmp_path / 'w'), log=lambda *a: None)
  assert info.value.field == 'local_step_buckets' and '\n' not in str(info.value)
  assert not (tmp_path / 'w' / 'summary.json').exists()
