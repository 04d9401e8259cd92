"""FedFa (Xu et al., IJCAI 2024) Alg. 1, eqs. (3)/(4), against a NumPy loop with a deque window."""

import collections

import numpy as np
import pytest
from quadratic import (
  arrivals_at,
  make_quadratic,
  np_fedbuff_step,
  np_local_gd,
  np_replay,
  simulate_quadratic,
)

import afl_jax

# Fully asynchronous (M = 1): 10 arrivals of 3 clients, staleness up to 4, Q in {1, 2, 3}.
IDS = [0, 1, 2, 0, 1, 2, 1, 0, 2, 1]
START = [0, 0, 0, 1, 2, 3, 4, 3, 5, 7]
STEPS = [1, 2, 3, 2, 1, 3, 2, 1, 2, 3]

# M = 2 with padding (step 1 slot 1, step 4 slot 0): arrivals are taken in slot order.
IDS2 = [[0, 1], [2, 0], [1, 2], [0, 1], [2, 0]]
START2 = [[0, 0], [0, 1], [1, 2], [2, 3], [3, 4]]
STEPS2 = [[2, 1], [3, 2], [1, 3], [2, 2], [1, 3]]
MASK2 = [[1, 1], [1, 0], [1, 1], [1, 1], [0, 1]]

LR = 0.3


def _async_schedule():
  col = lambda z: np.asarray(z)[:, None]
  return afl_jax.schedules.from_arrays(col(IDS), col(START), local_steps=col(STEPS))


def np_fedfa(schedule, a, b, x0, lr, window, mode, eta_g=1.0, on_fill=False, nova=False, mu=0.0):
  """Alg. 1 with a window of exactly K (FedNova or FedProx clients as asked); x after each step."""
  history = [np.array(x0, np.float64)]  # history[s]: the broadcast before step s
  x = history[0]
  buf = collections.deque(maxlen=window)  # (local model, start model, local steps)
  received = 0
  for t in range(schedule.num_steps):
    for i, s, q in arrivals_at(schedule, t):
      buf.append((np_local_gd(a[i], b[i], history[s], lr, q, mu), history[s], q))
      received += 1
      if not (received > window or (on_fill and received == window)):
        continue
      deltas = [w - st for w, st, _ in buf]  # w_local - w_start (the paper's Delta)
      if nova:  # FedNova: tau_eff * mean(Delta_k / tau_k) over the window.
        tau_eff = np.mean([q for _, _, q in buf])
        deltas = [tau_eff * d / q for d, (_, _, q) in zip(deltas, buf)]
      if mode == 'param':  # eq. (3): mean of the buffered client models.
        x = np.mean([st for _, st, _ in buf], axis=0) + np.mean(deltas, axis=0)
      else:  # eq. (4): w_g + eta_g / K * sum of the buffered deltas.
        x = x + eta_g / window * np.sum(deltas, axis=0)
    history.append(x)
  return np.stack(history[1:])


def _run(name, schedule, x0, **hp):
  a, b = make_quadratic(dtype=np.float64)
  return a, b, simulate_quadratic(name, a, b, np.asarray(x0, np.float64), schedule, **hp)


# Variants on the fully asynchronous schedule, and plain FedFa on the two-slot one.
CASES = [(m, v) for m in ('param', 'delta') for v in ('', 'on_fill', 'nova', 'two_slots')]


@pytest.mark.parametrize('mode, variant', CASES + [('delta', 'prox')])
def test_fedfa_matches_numpy_alg1(mode, variant, x64):
  two = variant == 'two_slots'
  if two:
    sched = afl_jax.schedules.from_arrays(IDS2, START2, local_steps=STEPS2, mask=MASK2)
  else:
    sched = _async_schedule()
    assert sched.max_arrivals == 1 and sched.max_staleness == 4
  k, x0, on_fill = (2 if two else 3), np.linspace(-1, 1, 4), variant == 'on_fill'
  hp = dict(client_lr=LR, window_size=k, aggregate_on_fill=on_fill)
  hp |= dict(server_lr=0.7) if mode == 'delta' else {}
  hp |= dict(mu=0.4) if variant == 'prox' else {}
  name = f'fedfa_{mode}' + (f'_{variant}' if variant in ('nova', 'prox') else '')
  a, b, res = _run(name, sched, x0, **hp)
  ref = lambda **kw: np_fedfa(sched, a, b, x0, LR, k, mode, eta_g=0.7, on_fill=on_fill, **kw)
  expected = ref(nova=variant == 'nova', mu=hp.get('mu', 0.0))
  got = np.asarray(res.params_history['x'])
  np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)
  if variant in ('nova', 'prox'):
    assert not np.allclose(expected, ref())  # the normalization / proximal term matters
  aggregations = res.metrics['server/aggregations']
  if two:  # arrivals are taken in slot order, padded slots skipped
    np.testing.assert_array_equal(aggregations, [0, 1, 2, 2, 1])
    return
  # Warm-up: the first K arrivals (K - 1 with aggregate_on_fill) leave the model unchanged.
  warm = 2 if on_fill else 3
  np.testing.assert_array_equal(got[:warm], np.tile(x0, (warm, 1)))
  assert not np.allclose(got[warm], x0)
  np.testing.assert_array_equal(aggregations, (np.arange(10) >= warm).astype(np.float32))
  # The version counter advanced at every arrival, warm-up included.
  assert int(res.final_state.step) == 10 and int(res.final_state.server.count) == 10


def test_fedfa_delta_literal_eq4_applies_each_delta_up_to_k_times(x64):
  # Closed form, K = 2, eta_g = 1, D_n = w_local - w_start of arrival n (0-based). Arrivals
  # 0 and 1 fill the window; arrival 2 moves x by (D1 + D2) / 2, arrival 3 by (D2 + D3) / 2
  # (D2 is applied twice, D0 never). Arrivals 0-3 all started from x0 (no update before 3).
  x0 = np.zeros(4)
  sched = _async_schedule()
  a, b, res = _run('fedfa_delta', sched, x0, client_lr=LR, window_size=2, server_lr=1.0)
  got = np.asarray(res.params_history['x'])
  d = lambda n: np_local_gd(a[IDS[n]], b[IDS[n]], x0, LR, STEPS[n]) - x0
  np.testing.assert_array_equal(got[1], x0)
  np.testing.assert_allclose(got[2], x0 + 0.5 * (d(1) + d(2)), atol=1e-12)
  np.testing.assert_allclose(got[3], x0 + 0.5 * (d(1) + d(2)) + 0.5 * (d(2) + d(3)), atol=1e-12)


def test_no_sliding_is_fedbuff_with_buffer_k_same_schedule(x64):
  # Sec. 3.1: replacing all K items before aggregating is FedBuff with buffer K. A step with
  # K arrivals fills the window exactly once.
  x0 = np.linspace(-1, 1, 4)
  sched = afl_jax.schedules.from_arrays(
    [[0, 1], [2, 0], [1, 2], [0, 1], [2, 0]],
    [[0, 0], [1, 0], [2, 1], [2, 3], [4, 2]],
    local_steps=[[2, 1], [3, 2], [1, 3], [2, 2], [1, 3]],
  )
  a, b, res = _run(
    'fedfa_delta', sched, x0, client_lr=LR, server_lr=0.7, window_size=2, sliding=False
  )
  expected = np_replay(sched, a, b, x0, LR, np_fedbuff_step(0.7))
  np.testing.assert_allclose(res.params_history['x'], expected, atol=1e-12, rtol=1e-12)


def test_no_sliding_is_fedbuff_on_the_fully_async_clock(x64):
  # The same FedBuff run, one arrival per server step: FedBuff step j's K arrivals become
  # steps jK .. jK + K - 1, and FedBuff version s is FedFa version sK.
  k = 3
  ids = [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1]]
  start = [[0, 0, 0], [0, 1, 1], [2, 1, 2], [3, 2, 3]]
  steps = [[1, 2, 3], [2, 1, 3], [3, 3, 1], [2, 2, 1]]
  buff_sched = afl_jax.schedules.from_arrays(ids, start, local_steps=steps)
  flat = lambda z: np.asarray(z).reshape(-1, 1)
  fa_start = flat(np.asarray(start) * k)
  fa_sched = afl_jax.schedules.from_arrays(flat(ids), fa_start, local_steps=flat(steps))
  assert fa_sched.max_staleness > k
  x0 = np.linspace(-1, 1, 4)
  a, b, res = _run(
    'fedfa_delta', fa_sched, x0, client_lr=LR, server_lr=0.5, window_size=k, sliding=False
  )
  expected = np_replay(buff_sched, a, b, x0, LR, np_fedbuff_step(0.5))
  got = np.asarray(res.params_history['x']).reshape(4, k, 4)
  np.testing.assert_allclose(got[:, -1], expected, atol=1e-12, rtol=1e-12)
  # Between window fills the model does not move.
  before = np.concatenate([x0[None], expected[:-1]])
  np.testing.assert_allclose(got[:, :-1], np.repeat(before[:, None], k - 1, 1), atol=1e-12)
