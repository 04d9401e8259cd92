"""FedEcho's Table 1 delay model: runtime categories, per-client uniform durations."""

import numpy as np
import pytest

from afl_jax.algorithms._fedecho import held_checkpoints
from afl_jax.errors import ArgumentError, ConfigError
from afl_jax.pipeline import config as config_lib
from afl_jax.schedules import fedecho_table1 as fedecho_delays
from afl_jax.schedules import registry
from afl_jax.schedules.durations import Durations

SHARES = (0.6, 0.3, 0.1)  # Sec. 5.1: short, medium, long


def _sizes(n=50, seed=0):
  return np.random.default_rng(seed).permutation(np.arange(20, 2000))[:n]  # distinct


def test_category_shares_and_long_group_cap():
  cat = fedecho_delays.runtime_categories(_sizes(), gamma=1.0, fractions=SHARES, seed=3)
  np.testing.assert_array_equal(np.bincount(cat, minlength=3), [30, 15, 5])
  schedule = lambda **table1: fedecho_delays.schedule(_sizes(), 25, 5, 10, **table1)
  with pytest.raises(ArgumentError, match=r'^fractions=\(0.5, 0.3, 0.2\) is invalid: .* long'):
    schedule(fractions=(0.5, 0.3, 0.2))
  with pytest.raises(ArgumentError, match=r'^gamma=0.0 is invalid: must be > 0'):
    schedule(gamma=0.0)
  with pytest.raises(ArgumentError, match=r'^fractions=\(0.5, 0.3, 0.1\) is invalid: .* summing'):
    schedule(fractions=(0.5, 0.3, 0.1))


def test_small_gamma_makes_the_largest_clients_slow_and_large_gamma_does_not():
  sizes = _sizes(100, seed=1)
  order = np.argsort(-sizes)
  cats = lambda g, s: fedecho_delays.runtime_categories(sizes, gamma=g, fractions=SHARES, seed=s)
  cat = cats(1e-5, 0)
  np.testing.assert_array_equal(np.sort(np.flatnonzero(cat == 2)), np.sort(order[:10]))
  np.testing.assert_array_equal(np.sort(np.flatnonzero(cat == 1)), np.sort(order[10:40]))
  # gamma -> inf: the assignment no longer follows the sample counts (chance level is 0.1).
  hits = [np.isin(np.flatnonzero(cats(1e6, s) == 2), order[:10]).mean() for s in range(20)]
  assert np.mean(hits) < 0.3


@pytest.mark.parametrize('delay,long_range', [('large', (500.0, 800.0)), ('mild', (100.0, 200.0))])
def test_durations_follow_table_1_per_category(delay, long_range):
  dur = fedecho_delays.durations(
    _sizes(), delay=delay, unit=10.0, gamma=1.0, fractions=SHARES, seed=2
  )
  assert isinstance(dur, Durations)
  ranges = {0: (10.0, 20.0), 1: (30.0, 50.0), 2: long_range}  # seconds (unit = 10 s)
  ids = np.repeat(np.arange(50), 400)
  d = dur.draw(np.random.default_rng(0), ids)
  for c, (lo, hi) in ranges.items():
    dc = d[dur.category[ids] == c]
    assert dc.min() >= lo and dc.max() <= hi
    np.testing.assert_allclose(dc.mean(), (lo + hi) / 2, rtol=0.02)  # U(lo, hi) mean
    assert dc.max() - dc.min() > 0.9 * (hi - lo)


def test_schedule_on_fedbuff_clock():
  sizes = _sizes()
  sched = fedecho_delays.schedule(sizes, 25, 5, 60, delay='large', seed=0)
  assert sched.num_clients == 50 and sched.max_arrivals == 5 and sched.mask.all()
  table1 = dict(delay='large', unit=10.0, gamma=1.0, fractions=SHARES)
  cat = fedecho_delays.durations(sizes, seed=0, **table1).category
  counts = sched.participation_counts
  assert counts[cat == 0].mean() > 5 * max(counts[cat == 2].mean(), 0.1)  # stragglers rare
  assert held_checkpoints(sched).max() <= 25
  with pytest.raises(ValueError, match='delay'):
    fedecho_delays.schedule(sizes, 25, 5, 10, delay='huge')


def test_config_gamma_reaches_the_schedule_and_must_be_positive():
  sizes = _sizes()
  ctx = registry.ScheduleContext(50, 60, np.full(50, 5), sizes, 0)
  for gamma in (1e-5, 1.0):
    s = {'concurrency': 25, 'buffer_size': 5, 'straggler_gamma': gamma}
    built = registry.SCHEDULES.make('fedecho_large', ctx=ctx, **s)
    want = fedecho_delays.schedule(sizes, 25, 5, 60, delay='large', gamma=gamma, local_steps=5)
    assert built.digest() == want.digest()
  c = config_lib.default()
  c.schedule.kind, c.schedule.concurrency, c.schedule.buffer_size = 'fedecho_large', 25, 5
  c.num_clients = 50
  for bad in (0.0, -1.0):
    c.schedule.straggler_gamma = bad
    with pytest.raises(ConfigError, match=r'config.schedule.straggler_gamma=.* must be > 0'):
      config_lib.validate(c)
