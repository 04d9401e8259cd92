"""Sizes checked from the config before anything is allocated (afl_jax/pipeline/sizes.py)."""

import ml_collections
import pytest
from ml_collections.config_flags import config_path

from afl_jax.errors import ConfigError
from afl_jax.pipeline import sizes


def config(**overrides):
  c = ml_collections.ConfigDict(
    {
      'dataset': 'digits',
      'num_clients': 20,
      'num_rounds': 40,
      'model': 'mlp',
      'client_block_size': 0,
      'batch_size': 32,
      'schedule': {
        'kind': 'fedbuff',
        'concurrency': 6,
        'buffer_size': 3,
        'clients_per_step': 5,
      },
    }
  )
  for k, v in overrides.items():
    config_path.set_value(k, c, v)
  return c


@pytest.mark.parametrize(
  'kind, m',
  [
    ('fedbuff', 3),
    ('fedecho_mild', 3),
    ('synchronous', 5),
    ('random_staleness', 5),
    ('fully_async', 1),
    ('waiting_windows', 20),
    ('port', 3),
  ],
)
def test_slots_per_step_by_kind(kind, m):
  assert sizes.slots_per_step(config(**{'schedule.kind': kind}))[0] == m


def test_every_registered_schedule_kind_is_known_to_sizes_and_validation():
  from afl_jax import schedules
  from afl_jax.pipeline import config as config_lib

  for kind in schedules.SCHEDULES:
    specs = schedules.SCHEDULES.specs(kind)
    assert all(spec is not None for spec in specs.values()), kind  # every setting has a range
    c = config_lib.default()
    c.schedule.kind = kind
    config_lib.validate(c)
    c = config_lib.resolve(c)  # exactly the kind's settings, each with its default
    assert set(c.schedule) == {'kind', 'seed', *schedules.settings(kind)}, kind
    m, field = sizes.slots_per_step(c)
    assert field in ('num_clients', 'schedule.kind') or field[len('schedule.') :] in c.schedule
    assert 1 <= m <= c.num_clients, kind
  c = config_lib.default()
  c.schedule.kind = 'port'
  c.schedule.staleness_bound = 0
  with pytest.raises(ConfigError, match=r'^config.schedule.staleness_bound=0 is invalid') as info:
    config_lib.validate(c)
  assert info.value.field == 'schedule.staleness_bound'


def test_estimate_is_bytes_of_the_schedule_arrays():
  r = sizes.estimate(config(num_rounds=1000, **{'schedule.kind': 'synchronous'}))
  assert r['slots'] == 5000
  assert r['schedule_arrays'] == 5000 * (4 + 4 + 4 + 1) + 1000 * 8
  assert r['total'] == r['schedule_arrays'] + r['schedule_builder'] + r['client_tables']


def test_sane_config_passes():
  r = sizes.check(config(), limit_bytes=2**30)
  assert r['total'] < 2**20


def test_absurd_num_rounds_is_refused_with_estimate_and_limit():
  with pytest.raises(ConfigError) as info:
    sizes.check(config(num_rounds=2_000_000_000), limit_bytes=2**40)
  msg = str(info.value)
  assert msg.startswith('config.num_rounds=2000000000 is invalid:')
  assert '6,000,000,000 slots' in msg and 'limit of 20,000,000 slots' in msg
  assert 'GiB' in msg and '\n' not in msg


def test_waiting_windows_blames_num_clients_when_it_sets_m():
  c = config(num_clients=10**7, num_rounds=10, **{'schedule.kind': 'waiting_windows'})
  with pytest.raises(ConfigError, match=r'^config.num_clients=10000000 is invalid'):
    sizes.check(c, limit_bytes=2**40)


def test_host_memory_limit_blames_num_clients_for_generated_data():
  c = config(dataset='synthetic', num_clients=10**6)
  with pytest.raises(ConfigError) as info:
    sizes.check(c, limit_bytes=8 * 2**30)
  msg = str(info.value)
  assert msg.startswith('config.num_clients=1000000 is invalid: the host-side arrays need')
  assert 'generated data' in msg and 'limit is 8.0 GiB' in msg


def test_host_memory_limit_blames_num_rounds_for_the_schedule():
  with pytest.raises(ConfigError, match=r'^config.num_rounds=1000000 is invalid.*limit is 1.0 MiB'):
    sizes.check(config(num_rounds=10**6), limit_bytes=2**20)


def test_memory_check_names_the_field_of_the_largest_component():
  fields = sizes.memory_fields(config())
  report = {'per_client_state': 10, 'ring_buffer': 1, 'total': 100}
  with pytest.raises(ConfigError) as info:
    sizes.check_memory(report, 10, fields)
  msg = str(info.value)
  assert msg.startswith('config.num_clients=20 is invalid: this run needs about')
  assert info.value.field == 'num_clients'
  report = {'per_client_state': 1, 'stacked_messages': 10, 'total': 100}
  with pytest.raises(ConfigError, match=r'^config.schedule.buffer_size=3 is invalid') as info:
    sizes.check_memory(report, 10, fields)
  assert info.value.field == 'schedule.buffer_size'
  sizes.check_memory(report, 1000, fields)  # fits: nothing raised
  sizes.check_memory(report, None, fields)  # no limit known: nothing raised
