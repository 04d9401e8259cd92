"""One name -> factory mechanism; run context declared at registration, never inspected."""

import pytest

import afl_jax
from afl_jax import compression, data, models, schedules
from afl_jax.algorithms import registry
from afl_jax.algorithms.registry import RunInfo
from afl_jax.registry import Registry


def test_registry_lists_valid_names_and_refuses_duplicates():
  r = Registry('widget')
  r.register('b', lambda: 2)

  @r.register('a', colour='red')
  def a():
    return 1

  assert r.names() == ['a', 'b'] and r.get('a')() == 1 and r.meta('a') == {'colour': 'red'}
  assert 'a' in r and len(r) == 2
  with pytest.raises(ValueError, match=r"unknown widget name='c'; valid: \['a', 'b'\]"):
    r.get('c')
  with pytest.raises(ValueError, match='registered twice'):
    r.register('a', lambda: 3)


@pytest.mark.parametrize(
  'reg', [registry.ALGORITHMS, compression._registry.COMPRESSORS, models.MODELS, data.DATASETS]
)
def test_every_kind_of_name_uses_the_one_registry(reg):
  assert isinstance(reg, Registry) and len(reg) >= 3


def test_schedules_by_name_include_fedecho_table_1():
  assert isinstance(schedules.SCHEDULES, Registry)
  assert {'fedbuff', 'fedecho_large', 'fedecho_mild', 'waiting_windows'} <= set(schedules.SCHEDULES)


@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_factory_taking_a_run_info_field_declares_it(name):
  params = registry.parameters(name)
  takes = [f for f in registry.CONTEXT_FIELDS if f in params]
  assert sorted(takes) == sorted(registry.context(name)), (
    f'@register({name!r}) must declare context={tuple(takes)}'
  )
  assert not set(registry.context(name)) & set(afl_jax.algorithms.hyperparameters(name))


def test_get_fills_declared_context_from_run_info_unless_given():
  info = RunInfo(num_clients=7)
  alg = afl_jax.algorithms.get('asynfl', run=info, client_lr=0.1)
  assert alg.name == 'asynfl'
  with pytest.raises(ValueError, match='num_clients'):
    afl_jax.algorithms.get('asynfl', run=info, num_clients=0)  # given by hand: wins
  with pytest.raises(
    ValueError,
    match=r"^hparams.bits=4 is invalid: algorithm 'fedbuff' takes no setting 'bits'; valid: \[",
  ):
    afl_jax.algorithms.get('fedbuff', run=info, bits=4)


def test_register_refuses_unknown_context():
  with pytest.raises(ValueError, match='not RunInfo fields'):
    registry.register('never', context=('num_widgets',))
