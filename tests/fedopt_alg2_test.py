"""FedOPT with ``convention='alg2'``: Reddi et al. 2021, Alg. 2, against NumPy.

The NumPy loop below transcribes Alg. 2 in the paper's own signs (``Delta_t`` the mean
of ``x_local - x_start``, ``x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)``), with
``m_{-1} = 0`` and ``v_{-1} = tau^2``, plus the two variants (Kingma & Ba's step-size
bias correction with an offset; tau inside the square root). The schedule has stale
arrivals and a step with no arrival, which must leave x, m, v and t as they were.
Flower's settings (docs/algorithms/baselines.md, docs/algorithms/fedgm.md) are also run
on clients of unequal example counts against the example-weighted mean.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quadratic import make_quadratic, np_replay, quadratic_loss, simulate_quadratic

import afl_jax

LR, ETA, BETA1, BETA2, TAU = 0.3, 0.2, 0.8, 0.9, 0.05
IDS = [[0, 1], [2, 0], [0, 0], [1, 2], [0, 1], [2, 0]]
START = [[0, 0], [0, 1], [0, 0], [2, 1], [3, 4], [4, 4]]
MASK = [[1, 1], [1, 1], [0, 0], [1, 1], [1, 1], [1, 1]]  # step 2: no arrival
X0 = np.linspace(-1.0, 1.0, 4)


def _schedule():
  return afl_jax.schedules.from_arrays(IDS, START, local_steps=[[2, 3]] * 6, mask=MASK)


def np_mean_delta(locals_, starts, ids, sizes):
  """Delta_t: the mean of ``x_local - x_start``, uniform (sizes None) or by example counts
  (Flower's ``sum_i n_i x_i / sum_i n_i`` minus the model all its clients started from)."""
  deltas = [loc - s for loc, s in zip(locals_, starts, strict=True)]
  if sizes is None:
    return np.mean(deltas, axis=0)
  n = np.array([sizes[i] for i in ids], np.float64)
  return sum(w * d for w, d in zip(n, deltas, strict=True)) / n.sum()


def np_alg2(
  rule, beta1=BETA1, bias_correction=False, offset=1, inside=False, v_init=None, sizes=None
):
  """A server_step for np_replay: Alg. 2 line by line; also records sign(v - Delta^2).

  With ``sizes`` (examples per client) Delta_t is the example-weighted mean and the step
  takes the arrivals' ids (``np_replay(..., with_ids=True)``).
  """
  state = {'m': None, 'v': None, 't': 0, 'signs': set()}

  def step(x, locals_, starts, taus, ids=None):
    del taus
    if not locals_:  # no arrival: nothing moves, t does not advance
      return x
    delta = np_mean_delta(locals_, starts, ids, sizes)
    m = np.zeros_like(x) if state['m'] is None else state['m']
    v = np.full_like(x, TAU**2 if v_init is None else v_init) if state['v'] is None else state['v']
    m = beta1 * m + (1 - beta1) * delta
    if rule == 'adagrad':
      v = v + delta**2
    elif rule == 'yogi':
      state['signs'] |= set(np.sign(v - delta**2).tolist())
      v = v - (1 - BETA2) * delta**2 * np.sign(v - delta**2)
    else:
      v = BETA2 * v + (1 - BETA2) * delta**2
    eta = ETA
    if bias_correction:
      p = state['t'] + offset
      eta = ETA * np.sqrt(1 - BETA2**p) / (1 - beta1**p)
    denom = np.sqrt(v + TAU**2) if inside else np.sqrt(v) + TAU
    state.update(m=m, v=v, t=state['t'] + 1)
    return x + eta * m / denom

  return step, state


def _fedopt(rule, **hp):
  hp = dict(server_optimizer=rule, convention='alg2', beta1=BETA1, beta2=BETA2, tau=TAU) | hp
  return afl_jax.algorithms.make('fedopt', client_lr=LR, server_lr=ETA, **hp)


FLOWER = {  # docs/algorithms/baselines.md, the settings that give Flower's strategies
  'FedAdam': (
    'adam',
    dict(bias_correction=True, bias_correction_offset=2, initial_accumulator=0.0),
    dict(bias_correction=True, offset=2, v_init=0.0),
  ),
  'FedYogi': ('yogi', dict(initial_accumulator=0.0), dict(v_init=0.0)),
  'FedAdagrad': ('adagrad', dict(beta1=0.0, initial_accumulator=0.0), dict(beta1=0.0, v_init=0.0)),
}

CASES = [
  ('adagrad', {}, {}),
  ('yogi', {}, {}),
  ('adam', {}, {}),
  ('adam', dict(bias_correction=True), dict(bias_correction=True)),
  (
    'yogi',
    dict(bias_correction=True, tau_placement='inside'),
    dict(bias_correction=True, inside=True),
  ),
]


@pytest.mark.parametrize('rule, hp, np_hp', CASES)
def test_alg2_matches_numpy_transcription(rule, hp, np_hp, x64):
  a, b = make_quadratic(dtype=np.float64)
  res = simulate_quadratic(_fedopt(rule, **hp), a, b, X0, _schedule())
  step, state = np_alg2(rule, **np_hp)
  want = np_replay(_schedule(), a, b, X0, LR, step)
  got = np.asarray(res.params_history['x'])
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  assert np.abs(got[-1] - X0).max() > 1e-2  # it moved
  # The empty step: the model is the same (bitwise: one program, state selected) ...
  np.testing.assert_array_equal(got[2], got[1])
  # ... and the moments and t saw only the five steps with arrivals.
  alg2_state = res.final_state.server.opt_state[0]
  assert int(alg2_state.count) == 5 == state['t']
  # Our pseudo-gradient is the paper's Delta negated, so our m is the paper's m negated.
  np.testing.assert_allclose(alg2_state.mu['x'], -state['m'], rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(alg2_state.nu['x'], state['v'], rtol=1e-12, atol=1e-15)
  if rule == 'yogi':
    assert {-1.0, 1.0} <= state['signs']  # v grew and shrank: both branches of sign()


# ---- Flower's example weighting: clients of unequal sizes ------------------------------
# Flower averages the clients' models by their numbers of examples. Clients with 2, 5
# and 9 rows (sum-of-squares loss over their own rows): 'examples' weighs them 2:5:9.
SIZES = (2, 5, 9)


def _unequal_clients():
  rng = np.random.default_rng(1)
  a = [rng.normal(size=(n, 4)) / np.sqrt(n) for n in SIZES]
  b = [rng.normal(size=n) for n in SIZES]
  problem = afl_jax.problems.from_loss(
    quadratic_loss, [{'a': ai, 'b': bi} for ai, bi in zip(a, b, strict=True)], reduction='sum'
  )
  np.testing.assert_array_equal(problem.client_sizes, SIZES)
  return a, b, problem


def _run_unequal(alg, problem):
  return afl_jax.simulate(alg, problem, _schedule(), {'x': jnp.asarray(X0)}, jax.random.key(0))


@pytest.mark.parametrize('strategy', sorted(FLOWER))
def test_flower_settings_weight_unequal_clients_by_examples(strategy, x64):
  rule, hp, np_hp = FLOWER[strategy]
  a, b, problem = _unequal_clients()
  alg = _fedopt(rule, weighting='examples', **hp)
  got = np.asarray(_run_unequal(alg, problem).params_history['x'])
  step, state = np_alg2(rule, sizes=SIZES, **np_hp)
  want = np_replay(_schedule(), a, b, X0, LR, step, with_ids=True)
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  assert state['t'] == 5
  uniform, _ = np_alg2(rule, **np_hp)  # the same rule on the unweighted mean differs
  assert np.abs(np_replay(_schedule(), a, b, X0, LR, uniform) - want).max() > 1e-4


def test_fedavgm_with_flower_settings_is_flowers_undamped_momentum(x64):
  """docs/algorithms/fedgm.md: Flower's FedAvgM (v_1 = Delta_1, v_t = beta v_{t-1} + Delta_t,
  x <- x - eta_F v_t, Delta the example-weighted x_t - mean model) is ``fedavgm`` with
  ``server_lr = eta_F / (1 - beta)`` and ``weighting='examples'``."""
  eta_f, beta = 0.4, 0.7
  a, b, problem = _unequal_clients()
  hp = dict(client_lr=LR, server_lr=eta_f / (1 - beta), beta=beta)
  alg = afl_jax.algorithms.make('fedavgm', weighting='examples', **hp)
  got = np.asarray(_run_unequal(alg, problem).params_history['x'])
  flower = {'v': None}

  def step(x, locals_, starts, taus, ids):
    del taus
    if not locals_:  # a round without results: Flower keeps the model and the momentum
      return x
    pseudo_gradient = -np_mean_delta(locals_, starts, ids, SIZES)  # x_t - weighted mean
    v = flower['v']
    flower['v'] = pseudo_gradient if v is None else beta * v + pseudo_gradient
    return x - eta_f * flower['v']

  want = np_replay(_schedule(), a, b, X0, LR, step, with_ids=True)
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  assert np.abs(got[-1] - X0).max() > 1e-2  # it moved
  uniform = afl_jax.algorithms.make('fedavgm', **hp)
  other = np.asarray(_run_unequal(uniform, problem).params_history['x'])
  assert np.abs(other - want).max() > 1e-4  # the default (uniform) is not Flower's here
