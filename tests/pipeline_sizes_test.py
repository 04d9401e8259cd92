"""Sizes checked from the config before anything is allocated (afl_jax/pipeline/sizes.py)."""

import ml_collections
import pytest
from ml_collections.config_flags import config_path

from afl_jax.errors import ConfigError
from afl_jax.pipeline import sizes


def config(**overrides):
  schedule = {'kind': 'fedbuff', 'concurrency': 6, 'buffer_size': 3, 'clients_per_step': 5}
  c = ml_collections.ConfigDict(
    {'dataset': 'digits', 'num_clients': 20, 'num_rounds': 40, 'model': 'mlp'}
    | {'client_block_size': 0, 'batch_size': 32, 'schedule': schedule}
  )
  for k, v in overrides.items():
    config_path.set_value(k, c, v)
  return c


SLOTS = {'fedbuff': 3, 'fedecho_mild': 3, 'synchronous': 5, 'random_staleness': 5}
SLOTS |= {'fully_async': 1, 'waiting_windows': 20, 'port': 3}


@pytest.mark.parametrize('kind, m', SLOTS.items())
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


def test_estimate_is_bytes_of_the_schedule_arrays():
  r = sizes.estimate(config(num_rounds=1000, **{'schedule.kind': 'synchronous'}))
  assert r['slots'] == 5000
  assert r['schedule_arrays'] == 5000 * (4 + 4 + 4 + 1) + 1000 * 8
  assert r['total'] == r['schedule_arrays'] + r['schedule_builder'] + r['client_tables']


def test_sane_config_passes():
  assert sizes.check(config(), limit_bytes=2**30)['total'] < 2**20


@pytest.mark.parametrize(
  'fields,limit,said',
  [
    ({'num_rounds': 2_000_000_000}, 2**40, 'num_rounds=2000000000 is invalid: .*6,000,000,000 '
     'slots.*GiB.*limit of 20,000,000 slots'),
    ({'num_clients': 10**7, 'num_rounds': 10, 'schedule.kind': 'waiting_windows'}, 2**40,
     'num_clients=10000000 is invalid'),
    ({'dataset': 'synthetic', 'num_clients': 10**6}, 8 * 2**30,
     'num_clients=1000000 is invalid: the host-side arrays need.*generated data.*limit is 8.0 GiB'),
    ({'num_rounds': 10**6}, 2**20, 'num_rounds=1000000 is invalid.*limit is 1.0 MiB'),
  ],
)  # fmt: skip
def test_absurd_sizes_name_the_field_that_sets_them(fields, limit, said):
  with pytest.raises(ConfigError, match='^config.' + said) as info:
    sizes.check(config(**fields), limit_bytes=limit)
  assert '\n' not in str(info.value)


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
