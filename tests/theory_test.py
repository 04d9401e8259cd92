"""The papers' convergence theorems checked numerically (docs/theory.md, scripts/theory.py).

Each bound holds at its 3 values of T with every condition met, and the exponent of T
fitted on the last pair is within 0.05 of the theorem's; each counterexample the checks
found is a test that expects the failure. Then the pieces they stand on: the quadratic's
constants against their definitions, each schedule builder's staleness, each paper's
delay counter, single-stage FedGM by name and MasFL's margin. float64 (the script's
sweeps enable x64 themselves; the other tests take the ``x64`` fixture).
"""

import functools
import importlib.util
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import hand_arrivals, make_quadratic, np_local_gd, quadratic_task

import afl_jax
from afl_jax import compression, schedules
from afl_jax.algorithms import masfl_theory
from afl_jax.problems import quadratic, shifted_quadratic

_SPEC = importlib.util.spec_from_file_location(
  'theory', pathlib.Path(__file__).parents[1] / 'scripts' / 'theory.py'
)
theory = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(theory)


def measured(check):
  """``theory.measure`` of ``check`` with its counterexample runs, once per session."""
  return _measured(check.theorem)


@functools.cache
def _measured(theorem):
  (check,) = (c for c in theory.CHECKS if c.theorem == theorem)
  return theory.measure(check, theory.counterexample_runs(check), seeds=4)


# ---- the theorems ----------------------------------------------------------------------------
@pytest.mark.parametrize('check', theory.CHECKS, ids=lambda c: c.theorem)
def test_bound_holds_with_every_condition_met_and_the_rate_is_the_theorems(check):
  rows, _ = measured(check)
  assert [r.t for r in rows] == list(check.ts) and len(rows) == 3
  assert check.schedule(max(check.ts)).num_clients == theory.NUM_CLIENTS
  for t in check.ts:
    for name, ratio in check.conditions(t).items():
      assert ratio <= 1 + 1e-12, (t, name, ratio)
  for r in rows:
    assert r.observed <= r.bound, r
  assert abs(rows[-1].exponent - check.rate) <= 0.05, rows


def test_fedgm_thm_5_1_omits_the_condition_that_limits_the_server_step():
  """FedGM (Sun et al.) Thm 5.1 states: "Under the condition eta_l <= min{1/(8 K_{t,max}
  L), sqrt(1/(120 L^2 C_eta tau K_{t,max}^2))} [...] And further assume each client is
  included in S_t with probability m/n uniformly and independently", which does not
  limit eta. Its proof (App. F, step (i)) "holds by plugging in the assumption,
  2L^2 tau^2 eta-hat^2 C_eta^2 S eta_l^2 + (L^2 W_1^2 C_eta^2 + L eta-bar C_eta + C_eta)
  S eta_l <= m/n", which the theorem lacks. With every stated condition met and that
  one violated, the run diverges far above the stated bound.
  """
  t, lr, eta = (theory.BAD_51[k] for k in ('T', 'client_lr', 'server_lr'))
  *stated, omitted = theory.fedgm_51_conditions(eta, lr, theory.FEDGM_51.schedule(t)).values()
  assert max(stated) <= 1 + 1e-12 and omitted > 100
  _, (paths,) = measured(theory.FEDGM_51)
  bound = theory.fedgm_51_bound(t, eta, lr)
  assert theory.observed(paths) > 1e10 * bound
  assert theory.final(paths) > 1e10 * float(theory.PROBLEM.grad_norm2(theory.X0))


def test_fedfa_thm_1_condition_ignores_staleness():
  """FedFa (Xu et al.) Thm 1 states no condition; its proof's "To ensure T4+T5 <= 0, it
  is sufficient to choose eta_g eta_l^(q) Q <= 1/L" has no staleness in it: eq. (12)
  replaces the window's K models by "the global weight that is least optimized in the
  buffer" and the sum telescopes f(w^{t'}) - f(w^{t+1}) as if t' = t. With 5 clients
  always training (round robin) and a window of 5 (tau_max = 9 in eq. (8)'s counter),
  eta_g eta_l Q L = 0.5 and 1 diverge; 0.125 and 0.25 do not.
  """
  t = theory.BAD_FA['T']
  assert theory.fedfa_tau_max(theory.round_robin(t, theory.Q_FA)) == 9
  _, runs = measured(theory.FEDFA_1)
  start = float(theory.PROBLEM.grad_norm2(theory.X0))
  for rho, paths in zip(theory.BAD_FA['rho'], runs):
    if rho <= 0.25:
      assert theory.final(paths) < start and theory.observed(paths) <= theory.fedfa_bound(
        t, paths, rho
      )
    else:
      assert theory.final(paths) > 1e20 * start, rho


def test_asynflc_contraction_assumption_fails_for_top_k():
  """AsynFLC (Yang et al.) Def. 3, eq. (6): "||C(x) - C(y)|| <= (1 - gamma) ||x - y||,
  for all x, y", with "Top_k(x) with gamma = k/d". Top-1 of x = (1, 0.9), y = (0.9, 1)
  keeps different coordinates: ||C(x) - C(y)|| / ||x - y|| = 10 > 1 - gamma = 0.5 (no
  gamma in (0, 1] fits a discontinuous compressor). The contraction Top-k does satisfy,
  ||C(x) - x||^2 <= (1 - k/d) ||x||^2, is a different assumption.
  """
  top1 = compression.top_k(fraction=0.5)
  x, y = np.array([1.0, 0.9], np.float32), np.array([0.9, 1.0], np.float32)
  cx, cy = (np.asarray(top1.compress(v, top1.init(v), jax.random.key(0))[0]) for v in (x, y))
  np.testing.assert_array_equal([cx, cy], [[1.0, 0.0], [0.0, 1.0]])
  ratio = np.linalg.norm(cx - cy) / np.linalg.norm(np.float64(x) - np.float64(y))
  assert ratio == pytest.approx(10.0, rel=1e-6) and ratio > 1 - 1 / 2  # float32 inputs
  for v, c in ((x, cx), (y, cy)):
    assert np.sum((c - v) ** 2) <= (1 - 1 / 2) * np.sum(v**2)


# ---- the problem -----------------------------------------------------------------------------
def _autodiff_grads(q, x):
  """Each client's exact gradient at x by autodiff of the problem's own loss [N, d]."""
  views = q.problem.client_views
  one = lambda view: jax.grad(q.problem.loss_fn)({'x': x}, view)['x']
  return np.asarray(jax.vmap(one)(views))


def test_quadratic_constants_match_their_definitions(x64):
  rng = np.random.default_rng(3)
  lam, centers = np.array([0.2, 1.0, 3.0]), rng.normal(size=(4, 3))
  q = shifted_quadratic(lam, centers)
  assert (q.L, q.mu, q.sigma2) == (pytest.approx(3.0), pytest.approx(0.2), 0.0)
  np.testing.assert_allclose(q.x_star, centers.mean(0), rtol=1e-12)
  d = centers - centers.mean(0)
  assert q.f_star == pytest.approx(0.5 * np.mean(np.sum(lam * d * d, 1)), rel=1e-12)
  assert q.sigma_g2 == pytest.approx(np.mean(np.sum((lam * d) ** 2, 1)), rel=1e-12)
  for x in [q.x_star, *rng.normal(size=(3, 3)) * 4]:  # sigma_g2 at every x, by autodiff
    g = _autodiff_grads(q, jnp.asarray(x))
    spread = np.mean(np.sum((g - g.mean(0)) ** 2, 1))
    assert spread == pytest.approx(q.sigma_g2, rel=1e-10)
    assert q.grad_norm2(x) == pytest.approx(np.sum(g.mean(0) ** 2), rel=1e-10, abs=1e-24)
    np.testing.assert_allclose(q.client_grad_norm2(x), np.sum(g * g, 1), rtol=1e-10)
  assert q.gap(q.x_star) == 0 and q.grad_norm2(q.x_star) == pytest.approx(0, abs=1e-24)
  a, b = make_quadratic(dtype=np.float64)  # clients with different Hessians
  general = quadratic(a, b)
  assert general.sigma_g2 == math.inf
  assert general.L == pytest.approx(max(np.linalg.eigvalsh(ai.T @ ai)[-1] for ai in a))


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
  res = afl_jax.sweep(
    'fedbuff',
    q.problem,
    sched,
    {'x': jnp.array([3.0, -1.0])},
    jax.random.split(jax.random.key(0), 2),
    client_lr=0.1,
    eval_fn=q.eval_fn,
    eval_every=2,
    keep_every=2,
  )
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
  with pytest.raises(ValueError, match='not both'):
    schedules.random_staleness(6, 3, 50, window=4, max_staleness=3)


def test_each_builder_states_its_staleness():
  constant = schedules.durations.make('constant', value=1.0)
  assert schedules.synchronous(6, 3, 20, seed=2).max_staleness == 0
  fully = schedules.fully_async(8, 4, 30, durations=constant)  # buffer 1, 4 always training
  np.testing.assert_array_equal(fully.staleness[:, 0], np.minimum(np.arange(30), 3))
  bounded = schedules.fedbuff(30, 10, 3, 300, staleness_bound=2, seed=4)
  assert bounded.max_staleness == 2
  assert schedules.waiting_windows(4, 10, window=None, durations=constant).max_staleness == 0
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
  assert (ours['tau_max'], ours['tau_avg']) == (1, pytest.approx(1 / 3))
  for counter, offset in (('fedgm', 0), ('masfl', 0), ('asynfl', 1), ('fedfa', 1), ('ca2fl', -1)):
    got = s.stats(counter)
    assert (got['tau_max'], got['tau_avg']) == (1 + offset, pytest.approx(1 / 3 + offset))
    assert {k: v for k, v in got.items() if not k.startswith('tau')} == {
      k: v for k, v in ours.items() if not k.startswith('tau')
    }
  with pytest.raises(ValueError, match='counter must be one of'):
    s.stats('fedbuf')
  # AsynFL's Def. 4 over every client and step agrees with its counter on the arrivals.
  periodic = theory.periodic(60, 2, theory.PERIODS_AS)
  assert periodic.stats('asynfl')['tau_max'] == theory.asynfl_delays(periodic)['max'] == 2


# ---- algorithms ------------------------------------------------------------------------------
def test_single_stage_autonomous_fedgm_is_alg_4_with_one_stage(x64):
  """Alg. 4 with S = 1: the client sends ``Delta / K`` (line 7), the server steps eq. (2)
  on the mean (lines 10-13); the same rules as 'autonomous_fedgm' with one stage."""
  eta, beta, nu, lr, k = 0.7, 0.5, 0.3, 0.1, 3
  one = afl_jax.algorithms.get(
    'autonomous_fedgm_single_stage', client_lr=lr, server_lr=eta, beta=beta, nu=nu
  )
  staged = afl_jax.algorithms.get(
    'autonomous_fedgm',
    client_lr=lr,
    stage_lengths=(9,),
    server_lrs=(eta,),
    betas=(beta,),
    nus=(nu,),
  )
  assert afl_jax.algorithms.hyperparameters('autonomous_fedgm_single_stage') == (
    afl_jax.algorithms.hyperparameters('fedgm')
  )
  a, b = make_quadratic(dtype=np.float64)
  x0, key = np.linspace(-1.0, 1.0, 4), jax.random.key(0)
  task = quadratic_task(a[1], b[1], k, 4)
  want = (x0 - np_local_gd(a[1], b[1], x0, lr, k)) / k
  rng = np.random.default_rng(0)
  msgs, mask = rng.normal(size=(4, 2, 4)), np.array([True, False])  # slot 1 is padding
  x, d = x0.copy(), np.zeros(4)
  states = [alg.server.init({'x': jnp.asarray(x0)}) for alg in (one, staged)]
  for t, msg in enumerate(msgs):
    delta = msg[0]
    d = (1 - beta) * delta + beta * d
    x = x - eta * ((1 - nu) * delta + nu * d)
    for i, alg in enumerate((one, staged)):
      arrivals = hand_arrivals([0, 1], mask, step=t)
      states[i], _ = alg.server.update(states[i], {'x': jnp.asarray(msg)}, arrivals, key)
      np.testing.assert_allclose(states[i].params['x'], x, rtol=1e-13, atol=1e-15)
  for alg in (one, staged):
    start = {'x': jnp.asarray(x0)}
    sent, _, _ = alg.client.update(start, alg.client.init(start, task, key), task, key)
    np.testing.assert_allclose(sent['x'], want, rtol=1e-12, atol=1e-15)


def test_masfl_margin_leaves_the_conditions_slack_in_proportion(monkeypatch):
  s, k, t, lips, tau = 2, 2, 400, 1.0, 2
  room = t - math.sqrt(s * k * t) - 4 * s * k * tau**2
  for margin in (0.0, 0.5, 0.9):
    r = masfl_theory(s, k, t, lips, tau, margin)
    a = tau**2 * r.beta**2 + 20 * math.e**2 * r.client_lr**2 * k**2 * lips**2
    assert 1 - 4 * a - math.sqrt(s * k / t) == pytest.approx(margin * room / t, abs=1e-14)
  with pytest.raises(ValueError, match='margin'):
    masfl_theory(s, k, t, lips, tau, 1.0)
  built = []  # the registered factory builds MasFL with the theorem's rates at that margin
  real = afl_jax.algorithms._masfl.build
  monkeypatch.setattr(
    afl_jax.algorithms._masfl, 'build', lambda *a, **kw: built.append(a[1:4]) or real(*a, **kw)
  )
  given = dict(arrivals_per_step=s, local_steps=k, num_rounds=t, smoothness=lips, tau_max=tau)
  afl_jax.algorithms.get('masfl', margin=0.5, **given)
  assert built == [tuple(masfl_theory(s, k, t, lips, tau, 0.5))]
