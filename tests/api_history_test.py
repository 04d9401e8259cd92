"""``simulate``/``sweep`` keep every k-th iterate and evaluate, against FedBuff's NumPy replay."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic, np_fedbuff_step, np_replay, quadratic_problem, stale_schedule

import afl_jax
from afl_jax.errors import ArgumentError

LR, ETA = 0.3, 0.7


def _setup():
  a, b = make_quadratic(dtype=np.float64)
  x0 = np.linspace(-1, 1, 4)
  sched = stale_schedule()  # T = 6
  ref = np_replay(sched, a, b, x0, LR, np_fedbuff_step(ETA))  # ref[t]: after t + 1 steps
  return a, b, x0, sched, np.concatenate([x0[None], ref])  # [0..T] steps applied


def _held_out(params):  # "held-out" loss: distance to a fixed point, and a second value
  x = params['x']
  return {'dist': jnp.sum((x - 0.5) ** 2), 'first': x[0]}


@pytest.mark.parametrize('keep,every', [(2, 3), (4, 1), (1, 2), (3, 4), (None, None)])
def test_simulate_keeps_every_kth_iterate_and_evaluates(keep, every):
  with jax.enable_x64(True):
    a, b, x0, sched, ref = _setup()
    alg = afl_jax.algorithms.make('fedbuff', client_lr=LR, server_lr=ETA)
    periods = {} if keep is None else dict(keep_every=keep, eval_fn=_held_out, eval_every=every)
    res = afl_jax.simulate(
      alg, quadratic_problem(a, b), sched, {'x': jnp.asarray(x0)}, jax.random.key(0), **periods
    )
    if keep is None:  # the default: every iterate, no evaluations
      assert res.evaluations is None
      keep = 1
    kept = list(range(keep, 7, keep))
    np.testing.assert_array_equal(res.history_steps, kept)
    np.testing.assert_allclose(res.params_history['x'], ref[kept], rtol=1e-10, atol=1e-12)
    assert res.metrics['arrivals'].shape == (6,)  # per-step metrics stay whole
    np.testing.assert_array_equal(res.metrics['arrivals'], sched.mask.sum(1))
    if res.evaluations is not None:
      steps = sorted(set(range(0, 7, every)) | {6})
      np.testing.assert_array_equal(res.evaluations['step'], steps)
      dist = [np.sum((ref[s] - 0.5) ** 2) for s in steps]
      np.testing.assert_allclose(res.evaluations['dist'], dist, rtol=1e-10)
      np.testing.assert_allclose(res.evaluations['first'], ref[steps, 0], rtol=1e-10)


def test_sweep_keeps_and_evaluates_each_replica():
  with jax.enable_x64(True):
    a, b, x0, sched, _ = _setup()
    lrs = [0.2, 0.3]
    keys = jax.random.split(jax.random.key(0), 2)
    opts = dict(client_lr=lrs, server_lr=ETA, keep_every=3, eval_fn=_held_out, eval_every=2)
    res = afl_jax.sweep('fedbuff', quadratic_problem(a, b), sched, {'x': x0}, keys, **opts)
    np.testing.assert_array_equal(res.history_steps, [3, 6])
    np.testing.assert_array_equal(res.evaluations['step'], [0, 2, 4, 6])
    assert res.params_history['x'].shape == (2, 2, 4)
    assert res.evaluations['dist'].shape == (2, 4)
    for r, lr in enumerate(lrs):
      ref = np.concatenate([x0[None], np_replay(sched, a, b, x0, lr, np_fedbuff_step(ETA))])
      np.testing.assert_allclose(res.params_history['x'][r], ref[[3, 6]], rtol=1e-10, atol=1e-12)
      want = [np.sum((ref[s] - 0.5) ** 2) for s in (0, 2, 4, 6)]
      np.testing.assert_allclose(res.evaluations['dist'][r], want, rtol=1e-10)


@pytest.mark.parametrize('bad', [0, -1, 1.5, True])
def test_bad_periods_are_refused(bad):
  a, b, x0, sched, _ = _setup()
  alg = afl_jax.algorithms.make('fedbuff', client_lr=LR, server_lr=ETA)
  prob = quadratic_problem(a.astype(np.float32), b.astype(np.float32))
  p0 = {'x': x0.astype(np.float32)}
  with pytest.raises(ArgumentError, match='keep_every must be an integer >= 1'):
    afl_jax.simulate(alg, prob, sched, p0, jax.random.key(0), keep_every=bad)
