"""The papers' convergence theorems checked numerically (docs/theory.md, scripts/theory.py),
their counterexamples, and what they stand on; float64 throughout."""

import functools
import importlib.util
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic

import afl_jax
from afl_jax import compression, schedules
from afl_jax.algorithms import masfl_theory
from afl_jax.errors import ArgumentError
from afl_jax.problems import quadratic, shifted_quadratic

_SPEC = importlib.util.spec_from_file_location(
  'theory', pathlib.Path(__file__).parents[1] / 'scripts' / 'theory.py'
)
theory = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(theory)


@functools.cache
def measured(theorem):
  """``theory.measure`` of ``theorem``'s check with its counterexample runs, once per session."""
  (check,) = (c for c in theory.CHECKS if c.theorem == theorem)
  return theory.measure(check, theory.counterexample_runs(check), seeds=4)


# ---- the theorems ----------------------------------------------------------------------------
@pytest.mark.parametrize('check', theory.CHECKS, ids=lambda c: c.theorem)
def test_bound_holds_with_every_condition_met_and_the_rate_is_the_theorems(check):
  rows, _ = measured(check.theorem)
  assert [r.t for r in rows] == list(check.ts) and len(rows) == 3
  assert check.schedule(max(check.ts)).num_clients == theory.NUM_CLIENTS
  for t in check.ts:
    for name, ratio in check.conditions(t).items():
      assert ratio <= 1 + 1e-12, (t, name, ratio)
  for r in rows:
    assert r.observed <= r.bound, r
  assert abs(rows[-1].exponent - check.rate) <= 0.05, rows


def test_fedgm_thm_5_1_omits_the_condition_that_limits_the_server_step():
  """FedGM (Sun et al.) Thm 5.1's conditions do not limit eta; its proof (App. F, step (i))
  assumes one that does. With every stated condition met and that one violated, the run
  diverges far above the stated bound (docs/theory.md quotes both)."""
  t, lr, eta = (theory.BAD_51[k] for k in ('T', 'client_lr', 'server_lr'))
  *stated, omitted = theory.fedgm_51_conditions(eta, lr, theory.FEDGM_51.schedule(t)).values()
  assert max(stated) <= 1 + 1e-12 and omitted > 100
  _, (paths,) = measured(theory.FEDGM_51.theorem)
  bound = theory.fedgm_51_bound(t, eta, lr)
  assert theory.observed(paths) > 1e10 * bound
  assert theory.final(paths) > 1e10 * float(theory.PROBLEM.grad_norm2(theory.X0))


def test_fedfa_thm_1_condition_ignores_staleness():
  """FedFa (Xu et al.) Thm 1's step condition eta_g eta_l Q <= 1/L has no staleness in it
  (eq. (12) telescopes as if t' = t). Round robin over 5 clients, window 5 (tau_max = 9,
  eq. (8)): eta_g eta_l Q L = 0.5 and 1 diverge; 0.125 and 0.25 do not."""
  t = theory.BAD_FA['T']
  assert theory.fedfa_tau_max(theory.round_robin(t, theory.Q_FA)) == 9
  _, runs = measured(theory.FEDFA_1.theorem)
  start = float(theory.PROBLEM.grad_norm2(theory.X0))
  for rho, paths in zip(theory.BAD_FA['rho'], runs):
    if rho <= 0.25:
      assert theory.final(paths) < start
      assert theory.observed(paths) <= theory.fedfa_bound(t, paths, rho)
    else:
      assert theory.final(paths) > 1e20 * start, rho


def test_asynflc_contraction_assumption_fails_for_top_k():
  """AsynFLC (Yang et al.) Def. 3, eq. (6) asks ||C(x) - C(y)|| <= (1 - gamma) ||x - y||
  of Top_k with gamma = k/d: Top-1 of (1, 0.9) and (0.9, 1) gives ratio 10. Top-k does
  satisfy ||C(x) - x||^2 <= (1 - k/d) ||x||^2, a different assumption."""
  top1 = compression.top_k(fraction=0.5)
  x, y = np.array([1.0, 0.9], np.float32), np.array([0.9, 1.0], np.float32)
  cx, cy = (np.asarray(top1.compress(v, top1.init(v), jax.random.key(0))[0]) for v in (x, y))
  np.testing.assert_array_equal([cx, cy], [[1.0, 0.0], [0.0, 1.0]])
  ratio = np.linalg.norm(cx - cy) / np.linalg.norm(np.float64(x) - np.float64(y))
  assert ratio == pytest.approx(10.0, rel=1e-6) and ratio > 1 - 1 / 2  # float32 inputs
  for v, c in ((x, cx), (y, cy)):
    assert np.sum((c - v) ** 2) <= (1 - 1 / 2) * np.sum(v**2)


# ---- the problem -----------------------------------------------------------------------------
def test_quadratic_constants_match_their_definitions(x64):
  rng = np.random.default_rng(3)
  lam, centers = np.array([0.2, 1.0, 3.0]), rng.normal(size=(4, 3))
  q = shifted_quadratic(lam, centers)
  assert (q.L, q.mu, q.sigma2) == (pytest.approx(3.0), pytest.approx(0.2), 0.0)
  np.testing.assert_allclose(q.x_star, centers.mean(0), rtol=1e-12)
  d = centers - centers.mean(0)
  assert q.f_star == pytest.approx(0.5 * np.mean(np.sum(lam * d * d, 1)), rel=1e-12)
  assert q.sigma_g2 == pytest.approx(np.mean(np.sum((lam * d) ** 2, 1)), rel=1e-12)
  grad = jax.grad(q.problem.loss_fn)
  for x in [q.x_star, *rng.normal(size=(3, 3)) * 4]:  # sigma_g2 at every x, by autodiff
    g = np.asarray(jax.vmap(lambda v: grad({'x': jnp.asarray(x)}, v)['x'])(q.problem.client_views))
    spread = np.mean(np.sum((g - g.mean(0)) ** 2, 1))
    assert spread == pytest.approx(q.sigma_g2, rel=1e-10)
    assert q.grad_norm2(x) == pytest.approx(np.sum(g.mean(0) ** 2), rel=1e-10, abs=1e-24)
    np.testing.assert_allclose(q.client_grad_norm2(x), np.sum(g * g, 1), rtol=1e-10)
  assert q.gap(q.x_star) == 0 and q.grad_norm2(q.x_star) == pytest.approx(0, abs=1e-24)
  a, b = make_quadratic(dtype=np.float64)  # clients with different Hessians
  general = quadratic(a, b)
  assert general.sigma_g2 == math.inf
  assert general.L == pytest.approx(max(np.linalg.eigvalsh(ai.T @ ai)[-1] for ai in a))


@pytest.mark.parametrize(
  'make,match',
  [
    (lambda: shifted_quadratic([1.0, 2.0], [[np.nan, 0.0], [1.0, 0.0]]), r'^centers is invalid'),
    (lambda: shifted_quadratic([1.0, np.inf], [[0.0, 0.0]]), r'^eigenvalues is invalid'),
    (lambda: shifted_quadratic([1.0, 0.0], [[0.0, 0.0]]), r'eigenvalues > 0'),
    (lambda: shifted_quadratic([1.0], [[0.0]], sigma=np.inf), r'^sigma=inf is invalid'),
    (lambda: shifted_quadratic([1.0], [[0.0]], sigma=np.nan), r'^sigma=nan is invalid'),
    (lambda: quadratic(np.ones((2, 3, 2)), np.full((2, 3), np.inf)), r'^b is invalid'),
    (lambda: quadratic(np.ones((2, 3, 2)), np.ones((2, 4))), r'a must have shape \[N, n, d\]'),
    (lambda: quadratic(np.ones((2, 3, 2)), np.ones((2, 3)), sigma=-1.0), r'^sigma=-1.0'),
  ],
)
def test_a_problems_constants_are_validated_in_one_line(make, match):
  with pytest.raises(ArgumentError, match=match) as e:
    make()
  assert '\n' not in str(e.value) and 'afl_jax.problems.' in str(e.value)


def test_quadratic_noise_is_unbiased_with_variance_sigma2(x64):
  q = shifted_quadratic([1.0, 2.0], [[0.0, 1.0], [1.0, 0.0]], sigma=0.5)
  view = jax.tree.map(lambda v: v[0], q.problem.client_views)
  grad = lambda batch: np.asarray(jax.grad(q.problem.loss_fn)({'x': jnp.ones(2)}, batch)['x'])
  batch = q.problem.sample_fn(None, view, jax.random.key(7))
  np.testing.assert_allclose(grad(batch) - grad(view), batch['xi'], rtol=1e-12)  # g = grad + xi
  keys = jax.random.split(jax.random.key(1), 20000)
  xi = np.asarray(jax.vmap(lambda k: q.problem.sample_fn(None, view, k)['xi'])(keys))
  sq = np.sum(xi * xi, 1)
  assert abs(sq.mean() - q.sigma2) <= 5 * sq.std() / math.sqrt(sq.size)  # 5 standard errors
  assert np.all(np.abs(xi.mean(0)) <= 5 * xi.std(0) / math.sqrt(sq.size))


def test_eval_fn_reports_the_grad_norm_of_the_kept_iterates(x64):
  q = shifted_quadratic([0.5, 1.0], [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
  sched = schedules.random_staleness(3, 2, 6, max_staleness=1, local_steps=2)
  keys = jax.random.split(jax.random.key(0), 2)
  kw = dict(client_lr=0.1, eval_fn=q.eval_fn, eval_every=2, keep_every=2)
  res = afl_jax.sweep('fedbuff', q.problem, sched, {'x': jnp.array([3.0, -1.0])}, keys, **kw)
  x = np.asarray(res.params_history['x'])  # after steps 2, 4, 6
  np.testing.assert_allclose(res.evaluations['grad_norm2'][:, 1:], q.grad_norm2(x), rtol=1e-12)
  np.testing.assert_allclose(res.evaluations['gap'][:, 1:], q.gap(x), rtol=1e-12)


# ---- schedules: each builder's staleness and each paper's counter ---------------------------
def test_random_staleness_max_staleness_is_window_minus_one():
  s = schedules.random_staleness(6, 3, 300, max_staleness=3, seed=1)
  assert set(np.unique(s.staleness[3:])) == {0, 1, 2, 3}
  same = schedules.random_staleness(6, 3, 300, window=4, seed=1)
  np.testing.assert_array_equal(s.start_step, same.start_step)
  assert schedules.random_staleness(6, 3, 50, max_staleness=0).max_staleness == 0
  # (window and max_staleness together: registry_test's combinations)


def test_each_builder_states_its_staleness():
  constant = schedules.durations.make('constant', value=1.0)
  fully = schedules.fully_async(8, 4, 30, durations=constant)  # buffer 1, 4 always training
  np.testing.assert_array_equal(fully.staleness[:, 0], np.minimum(np.arange(30), 3))
  bounded = schedules.fedbuff(30, 10, 3, 300, staleness_bound=2, seed=4)
  assert bounded.max_staleness == 2
  slow = schedules.durations.make('constant', value=2.5)
  ww = schedules.waiting_windows(3, 12, window=1.0, durations=slow)  # report every 3 steps
  previous = np.full(3, -1)
  for t in range(12):
    for c, tau in zip(ww.client_ids[t][ww.mask[t]], ww.staleness[t][ww.mask[t]]):
      assert tau == t - (previous[c] + 1)
      previous[c] = t
  assert ww.mask.sum() == 12 and ww.max_staleness == 2


def test_stats_reports_each_papers_delay_counter():
  s = schedules.from_arrays([[0, 1], [2, 0], [1, 2]], [[0, 0], [0, 1], [1, 2]])  # tau 0,0,1,0,1,0
  ours = s.stats()
  rest = lambda d: {k: v for k, v in d.items() if not k.startswith('tau')}
  assert (ours['tau_max'], ours['tau_avg']) == (1, pytest.approx(1 / 3))
  for counter, offset in (('fedgm', 0), ('masfl', 0), ('asynfl', 1), ('fedfa', 1), ('ca2fl', -1)):
    got = s.stats(counter)
    assert (got['tau_max'], got['tau_avg']) == (1 + offset, pytest.approx(1 / 3 + offset))
    assert rest(got) == rest(ours)
  with pytest.raises(ValueError, match='counter must be one of'):
    s.stats('fedbuf')
  # AsynFL's Def. 4 over every client and step agrees with its counter on the arrivals.
  periodic = theory.periodic(60, 2, theory.PERIODS_AS)
  assert periodic.stats('asynfl')['tau_max'] == theory.asynfl_delays(periodic)['max'] == 2


# ---- MasFL's theorem rates -------------------------------------------------------------------
def test_masfl_margin_leaves_the_conditions_slack_in_proportion(monkeypatch):
  s, k, t, lips, tau = 2, 2, 400, 1.0, 2
  room = t - math.sqrt(s * k * t) - 4 * s * k * tau**2
  for margin in (0.0, 0.5, 0.9):
    r = masfl_theory(s, k, t, lips, tau, margin)
    a = tau**2 * r.beta**2 + 20 * math.e**2 * r.client_lr**2 * k**2 * lips**2
    assert 1 - 4 * a - math.sqrt(s * k / t) == pytest.approx(margin * room / t, abs=1e-14)
  with pytest.raises(ValueError, match='margin'):
    masfl_theory(s, k, t, lips, tau, 1.0)
  # (T - sqrt(SKT) - 4SK tau^2 < 0, zero smoothness, beta = sqrt(SK/T) > 1: registry_test)
  built = []  # the registered factory builds MasFL with the theorem's rates at that margin
  masfl, real = afl_jax.algorithms._masfl, afl_jax.algorithms._masfl.build
  monkeypatch.setattr(masfl, 'build', lambda *a, **kw: built.append(a[1:4]) or real(*a, **kw))
  given = dict(arrivals_per_step=s, local_steps=k, num_rounds=t, smoothness=lips, tau_max=tau)
  afl_jax.algorithms.make('masfl', margin=0.5, **given)
  assert built == [tuple(masfl_theory(s, k, t, lips, tau, 0.5))]
