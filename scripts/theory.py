"""The papers' convergence theorems measured on a quadratic with exact constants.

  python scripts/theory.py            # print the tables of docs/theory.md
  python scripts/theory.py --write    # and replace them in docs/theory.md

Each theorem with explicit constants (docs/theory.md says which) is one ``afl_jax.sweep``:
every T of its table times SEEDS gradient-noise seeds, plus its counterexample runs,
vmapped in one compiled program, in float64 (jax x64 is enabled here only). The problem
is :data:`PROBLEM` (``afl_jax.problems.shifted_quadratic``: L, mu, sigma^2, sigma_g^2
and f* exact); each schedule meets its theorem's delay assumption and each step size is
the theorem's own Theta(.) form, with every condition met (``Check.conditions``). A row
gives T, the observed ``(1/T) sum_{t<T} ||grad f(x_t)||^2`` (mean over the seeds), the
theorem's right-hand side, their ratio and the exponent of T fitted on this row and the
previous one. tests/theory_test.py asserts them, and each counterexample.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np
from absl import flags

import afl_jax
from afl_jax.algorithms import masfl_theory
from afl_jax.pipeline import cli
from afl_jax.pipeline import workdir as workdir_lib
from afl_jax.schedules import Schedule, from_arrays, random_staleness

SEEDS = 8
NUM_CLIENTS = 5
with jax.enable_x64(True):  # float64 data; every sweep runs under x64 too (run())
  PROBLEM = afl_jax.problems.shifted_quadratic(
    [0.5, 0.75, 1.0], np.random.default_rng(0).normal(size=(NUM_CLIENTS, 3)), sigma=0.5
  )
X0 = PROBLEM.x_star + 2.0
GAP0 = float(PROBLEM.gap(X0))  # f(x_0) - f*
L, SIGMA2, SIGMA_G2 = PROBLEM.L, PROBLEM.sigma2, PROBLEM.sigma_g2


class Check(NamedTuple):
  """One theorem: its runs at T, its conditions and its right-hand side at T."""

  theorem: str
  algorithm: str
  schedule: Callable[[int], Schedule]  # T -> a schedule meeting the delay assumption
  rates: Callable[[int], dict]  # T -> the theorem's step sizes (float hyperparameters)
  conditions: Callable[[int], dict]  # T -> {condition: left side / its limit}, each <= 1
  bound: Callable[[int, np.ndarray], float]  # T, the run's iterates -> the right-hand side
  ts: tuple[int, ...]  # the T of the table
  static: dict  # the hyperparameters every run shares
  rate: float = -0.5  # the theorem's exponent of T


# ---- schedules -----------------------------------------------------------------------------
def every_client(t: int, k: int, tau: int = 0) -> Schedule:
  """All N clients arrive at every step, each from a version drawn uniformly among the
  last ``tau + 1`` (tau = 0: the current one, a synchronous round)."""
  return random_staleness(NUM_CLIENTS, NUM_CLIENTS, t, max_staleness=tau, local_steps=k)


def round_robin(t: int, k: int) -> Schedule:
  """N clients always training, one arrival per step: client t mod N arrives at step t
  having started N - 1 steps before (staleness N - 1 once every client has reported)."""
  steps = np.arange(t)
  return from_arrays(steps % NUM_CLIENTS, np.maximum(steps - NUM_CLIENTS + 1, 0), local_steps=k)


def periodic(t: int, k: int, periods: tuple[int, ...]) -> Schedule:
  """Client i reports every ``periods[i]`` steps, trained from the step after its last
  report (AsynFL's continuous local training, eq. (4))."""
  p = np.asarray(periods)
  reports = (np.arange(t)[:, None] + 1) % p == 0  # [T, N]
  width = int(reports.sum(1).max())
  order = np.argsort(~reports, axis=1, kind='stable')[:, :width]  # reporters first
  mask = np.take_along_axis(reports, order, axis=1)
  start = np.arange(t)[:, None] + 1 - p[order]
  return from_arrays(order, np.where(mask, start, 0), local_steps=k, mask=mask, num_clients=p.size)


def decaying(value: float, t0: int) -> Callable[[int], float]:
  """``value * sqrt(t0 / T)``: a Theta(1/sqrt(T)) step size, ``value`` at ``T = t0``."""
  return lambda t: value * math.sqrt(t0 / t)


# ---- FedGM (Sun et al.), Thm 4.1 and 5.1 with S = 1 ------------------------------------------
K_GM, BETA_GM, NU_GM = 2, 0.5, 0.5
ETA_GM = math.sqrt(NUM_CLIENTS * K_GM)  # the corollaries' eta = Theta(sqrt(nK))


def w1(eta: float) -> float:
  """Constraint (3)'s W_1 = eta beta nu / (1 - beta) (W_1^2 = 2.5 <= sqrt(nK) at ETA_GM)."""
  return eta * BETA_GM * NU_GM / (1 - BETA_GM)


# Thm 4.1's two limits on eta_l (S = 1, C_eta = 1).
LIMITS_41 = {
  'eta_l <= 1/(8 K L)': 1 / (8 * K_GM * L),
  'eta_l <= 1/(K (L eta + 1 + L^2 W_1^2))': 1 / (K_GM * (L * ETA_GM + 1 + L**2 * w1(ETA_GM) ** 2)),
}
LR_41 = decaying(min(LIMITS_41.values()) / 8, 400)  # Cor. 4.2: eta_l = Theta(1/(sqrt(T) K))
TAU_51 = 3
LIMIT_51 = min(1 / (8 * K_GM * L), math.sqrt(1 / (120 * L**2 * TAU_51 * K_GM**2)))
LR_51 = decaying(LIMIT_51, 400)  # App. F: eta_l = Theta(1/sqrt(T))


def fedgm_41_bound(t: int, paths: np.ndarray) -> float:
  """Thm 4.1 with S = 1 (W_2 = T eta, C_eta = 1)."""
  n, k, lr, eta, w = NUM_CLIENTS, K_GM, LR_41(t), ETA_GM, w1(ETA_GM)
  psi_l = 32 / 17 * (L**2 * w**2 + L * eta + 1) * lr / n + 160 / 17 * lr**2 * L**2 * k
  psi_g = 960 / 17 * lr**2 * L**2 * k**2
  return 64 / 17 * GAP0 / (t * eta * lr * k) + psi_l * SIGMA2 + psi_g * SIGMA_G2


def fedgm_51_bound(t: int, eta: float, lr: float) -> float:
  """Thm 5.1 with S = 1, m = n and K_{t,i} = K: phi_1 = K, phi_2 = K^2, phi_3 = 1/K."""
  m, k, tau = NUM_CLIENTS, K_GM, TAU_51
  phi_l = 20 * lr**2 * L**2 * k
  phi_l += (4 * L**2 * tau**2 * eta**2 * lr**2 + 2 * L**2 * w1(eta) ** 2 * lr + 2 * lr) / (m * k)
  return 4 * GAP0 / (t * eta * lr) + phi_l * SIGMA2 + 120 * lr**2 * L**2 * k**2 * SIGMA_G2


def fedgm_51_conditions(eta: float, lr: float, schedule: Schedule) -> dict:
  """Thm 5.1's conditions (C_eta = 1) and the one App. F adds (S = 1, m = n)."""
  omitted = 2 * L**2 * TAU_51**2 * eta**2 * lr**2 + (L**2 * w1(eta) ** 2 + L * eta + 1) * lr
  return {
    'tau_{t,i} <= tau': schedule.max_staleness / TAU_51,
    'eta_l <= 1/(8 K L)': lr * 8 * K_GM * L,
    'eta_l <= sqrt(1/(120 L^2 tau K^2))': lr / math.sqrt(1 / (120 * L**2 * TAU_51 * K_GM**2)),
    'App. F: 2L^2tau^2eta^2eta_l^2 + (L^2W_1^2 + L eta + 1) eta_l <= m/n': omitted,
  }


FEDGM_41 = Check(
  'FedGM Thm 4.1',
  'fedgm',
  lambda t: every_client(t, K_GM),
  lambda t: {'client_lr': LR_41(t)},
  lambda t: {name: LR_41(t) / limit for name, limit in LIMITS_41.items()},
  fedgm_41_bound,
  (400, 1600, 6400),
  {'server_lr': ETA_GM, 'beta': BETA_GM, 'nu': NU_GM},
)
FEDGM_51 = Check(
  'FedGM Thm 5.1',
  'autonomous_fedgm_single_stage',
  lambda t: every_client(t, K_GM, TAU_51),
  lambda t: {'client_lr': LR_51(t), 'server_lr': ETA_GM},
  lambda t: fedgm_51_conditions(ETA_GM, LR_51(t), every_client(t, K_GM, TAU_51)),
  lambda t, paths: fedgm_51_bound(t, ETA_GM, LR_51(t)),
  (400, 1600, 6400),
  {'beta': BETA_GM, 'nu': NU_GM},
)
# The counterexample: the stated conditions met (eta_l at their limit), eta large enough
# to break the one App. F adds.
BAD_51 = {'T': 200, 'client_lr': LIMIT_51, 'server_lr': 80.0}


# ---- MasFL (Yan et al.), Thm 3.1 with App. C's constants --------------------------------
S_MAS, K_MAS, TAU_MAS, MARGIN_MAS = 2, 2, 2, 0.5


def masfl_rates(t: int) -> dict:
  return masfl_theory(S_MAS, K_MAS, t, L, TAU_MAS, MARGIN_MAS)._asdict()


def masfl_a(t: int) -> float:
  """Thm 3.1's a = tau_max^2 beta^2 + 20 e^2 eta^2 K^2 L^2."""
  r = masfl_rates(t)
  return TAU_MAS**2 * r['beta'] ** 2 + 20 * math.e**2 * r['client_lr'] ** 2 * K_MAS**2 * L**2


def masfl_bound(t: int, paths: np.ndarray) -> float:
  """App. C's last display, ``(3 - 4a)(4 L Delta + 26 sigma^2) / ((1 - 4a - sqrt(SK/T))
  sqrt(SKT)) + (3 - 4a) / (1 - 4a - sqrt(SK/T)) (200 e^2 S sigma^2 / T + 8 L^2 sigma^2 /
  (NKT))``."""
  s, k, n, a = S_MAS, K_MAS, NUM_CLIENTS, masfl_a(t)
  scale = (3 - 4 * a) / (1 - 4 * a - math.sqrt(s * k / t))
  first = (4 * L * GAP0 + 26 * SIGMA2) / math.sqrt(s * k * t)
  return scale * (first + 200 * math.e**2 * s * SIGMA2 / t + 8 * L**2 * SIGMA2 / (n * k * t))


def masfl_schedule(t: int) -> Schedule:
  """S of N drawn uniformly at every step (Alg. 1 line 3), staleness <= tau_max."""
  return random_staleness(NUM_CLIENTS, S_MAS, t, max_staleness=TAU_MAS, local_steps=K_MAS)


MASFL_31 = Check(
  'MasFL Thm 3.1',
  'masfl',
  masfl_schedule,
  masfl_rates,
  lambda t: {
    'tau <= tau_max': masfl_schedule(t).stats('masfl')['tau_max'] / TAU_MAS,
    '4a + sqrt(SK/T) <= 1': 4 * masfl_a(t) + math.sqrt(S_MAS * K_MAS / t),
  },
  masfl_bound,
  (400, 1600, 6400),
  {},
)


# ---- AsynFL (Yang et al.), Thm 1 -------------------------------------------------------------
K_AS, PERIODS_AS = 2, (1, 1, 2, 2, 2)
ETA_G_AS = math.sqrt(K_AS * NUM_CLIENTS)  # Cor. 1: eta_g = Theta(sqrt(Kn))
TAU_MAX_AS = max(PERIODS_AS)  # Def. 4's tau_max of this schedule (counting from 1)
LIMIT_AS = 1 / (36 * math.sqrt(2) * TAU_MAX_AS**1.5 * ETA_G_AS * K_AS * L)
LR_AS = decaying(LIMIT_AS, 400)  # Cor. 1: eta = Theta(1/(K sqrt(T)))


def asynfl_delays(schedule: Schedule) -> dict[str, float]:
  """Def. 2 and 4 in AsynFL's counter (ours + 1): tau_t^i = t + 1 - the version client i
  trains from, for every client at every step; ``t - tau_t^i < 0`` reads step 0."""
  t_all, n = schedule.num_steps, schedule.num_clients
  anchor, tau = np.zeros(n, np.int64), np.zeros((t_all, n), np.int64)
  for t in range(t_all):
    tau[t] = t + 1 - anchor
    anchor[schedule.client_ids[t][schedule.mask[t]]] = t + 1
  back = np.maximum(np.arange(t_all)[:, None] - tau, 0)  # t - tau_t^i
  avg, top = tau.mean(1), tau.max(1)
  return {
    'max': float(tau.max()),
    'avg0': float(tau.mean()),
    'avg1': float(avg[back].mean()),
    'avgm0': float(top.mean()),
    'avgm1': float(top[back].mean()),
  }


def asynfl_bound(t: int, paths: np.ndarray) -> float:
  """Thm 1, eq. (11)."""
  d = asynfl_delays(periodic(t, K_AS, PERIODS_AS))
  n, k, g, lr = NUM_CLIENTS, K_AS, ETA_G_AS, LR_AS(t)
  q = lr**2 * k**2 * L**2  # eta^2 K^2 L^2
  lam = 72 * d['avg0'] + 144 * d['avg0'] * d['max'] * q
  lam += (18 * d['avg0'] * d['max'] + 144 * d['max'] * d['avg1']) * q * g**2
  phi = d['max'] * d['avgm0'] * (288 + 1728 * q) + d['max'] * d['avgm1'] * g**2 * (288 + 1728 * q)
  phi += d['max'] * d['avgm0'] * g**2 * (36 + 216 * q)
  delayed = (33 * d['avg0'] + 72 * d['avg1']) * g**2 * SIGMA2 / n
  out = 8 * GAP0 / (lr * g * k * t) + 4 * lr * g * L * SIGMA2 / n
  out += lr**2 * k * L**2 * (4 * (SIGMA2 + 6 * k * SIGMA_G2) + delayed)
  return out + lam * lr**2 * k * L**2 * SIGMA2 + phi * q * SIGMA_G2


ASYNFL_1 = Check(
  'AsynFL Thm 1',
  'asynfl',
  lambda t: periodic(t, K_AS, PERIODS_AS),
  lambda t: {'client_lr': LR_AS(t)},
  lambda t: {
    'tau_max as assumed': asynfl_delays(periodic(t, K_AS, PERIODS_AS))['max'] / TAU_MAX_AS,
    'eta <= 1/(36 sqrt(2) tau_max^1.5 eta_g K L)': LR_AS(t) / LIMIT_AS,
  },
  asynfl_bound,
  (400, 1600, 6400),
  {'server_lr': ETA_G_AS},
)


# ---- FedFa (Xu et al.), Thm 1 ----------------------------------------------------------------
WINDOW_FA, Q_FA = 5, 2
ETA_G_FA = float(WINDOW_FA)  # Corollary: eta_g = O(K)
RHO_FA = decaying(0.0125, 1600)  # eta_g eta_l Q L (Corollary: eta_l = O(1/(K sqrt(TQ))))


def fedfa_tau_max(schedule: Schedule) -> int:
  """FedFa's tau_max (eq. (8), counting from 1) over the window items of eq. (3)-(4), one
  arrival per step: the arrival at step a from version s is aged t - s + 1 at each step
  t < a + K that it stays in the window."""
  a = np.arange(schedule.num_steps)
  last = np.minimum(a + WINDOW_FA - 1, schedule.num_steps - 1)
  return int((last - schedule.start_step[:, 0] + 1).max())


def fedfa_rates(rho: float) -> dict:
  """The client step at ``rho = eta_g eta_l Q L``."""
  return {'client_lr': rho / (ETA_G_FA * Q_FA * L)}


def fedfa_bound(t: int, paths: np.ndarray, rho: float | None = None) -> float:
  """Thm 1, eq. (9), constant eta_l; G (Assumption 3) is the largest ||grad f_k||^2 at
  the run's global iterates ``paths`` (no quadratic has bounded gradients on R^d)."""
  rho = RHO_FA(t) if rho is None else rho
  lr, q, g = fedfa_rates(rho)['client_lr'], Q_FA, ETA_G_FA
  big_g = float(PROBLEM.client_grad_norm2(paths).max())
  tau = fedfa_tau_max(round_robin(t, Q_FA))
  out = 2 * GAP0 / (g * q * lr * t) + L / 2 * g * lr * SIGMA2
  return out + 3 * L**2 * q**2 * lr**2 * (g**2 * tau**2 + 1) * (SIGMA2 + SIGMA_G2 + big_g)


FEDFA_1 = Check(
  'FedFa Thm 1',
  'fedfa_delta',
  lambda t: round_robin(t, Q_FA),
  lambda t: fedfa_rates(RHO_FA(t)),
  lambda t: {'App.: eta_g eta_l Q L <= 1': RHO_FA(t)},
  fedfa_bound,
  (1600, 6400, 25600),
  {'server_lr': ETA_G_FA, 'window_size': WINDOW_FA},
)
# The counterexample: eta_g eta_l Q L at and below 1, at T = 400.
BAD_FA = {'T': 400, 'rho': (0.125, 0.25, 0.5, 1.0)}
CHECKS = (FEDGM_41, FEDGM_51, MASFL_31, ASYNFL_1, FEDFA_1)


# ---- running ---------------------------------------------------------------------------------
def run(check: Check, runs: list[tuple[int, dict]], seeds: int = SEEDS) -> list[np.ndarray]:
  """One sweep of ``check.algorithm``: every ``(T, rates)`` of ``runs`` times ``seeds``
  noise seeds. Returns each run's iterates ``x_0 .. x_{T-1}``, [seeds, T, d].

  Every replica runs the schedule of the largest T: a run at T reads its first T steps,
  which meet the same delay assumption (and are ``check.schedule(T)`` for the
  deterministic schedules, whose delay statistics the bounds read).
  """
  replicas = [(t, rates) for t, rates in runs for _ in range(seeds)]
  hparams = {k: [rates[k] for _, rates in replicas] for k in replicas[0][1]}
  with jax.enable_x64(True):
    res = afl_jax.sweep(
      check.algorithm,
      PROBLEM.problem,
      check.schedule(max(t for t, _ in runs)),
      {'x': X0},
      jax.random.split(jax.random.key(0), len(replicas)),
      record_params=True,
      **check.static,
      **hparams,
    )
    xs = np.asarray(res.params_history['x'])
  start = np.broadcast_to(X0, (seeds, 1, X0.size))
  return [
    np.concatenate([start, xs[i * seeds : (i + 1) * seeds, : t - 1]], axis=1)
    for i, (t, _) in enumerate(runs)
  ]


def observed(paths: np.ndarray) -> float:
  """``(1/T) sum_{t<T} ||grad f(x_t)||^2``, averaged over the seeds (the expectation)."""
  return float(PROBLEM.grad_norm2(paths).mean())


def final(paths: np.ndarray) -> float:
  """``||grad f(x_{T-1})||^2``, averaged over the seeds."""
  return float(PROBLEM.grad_norm2(paths[:, -1]).mean())


class Row(NamedTuple):
  t: int
  observed: float
  bound: float
  exponent: float  # of T, fitted on this row and the previous one (nan on the first)


def measure(check: Check, extra: list[tuple[int, dict]] = (), seeds: int = SEEDS):
  """``check``'s table, and the iterates of the ``extra`` runs (same sweep)."""
  paths = run(check, [(t, check.rates(t)) for t in check.ts] + list(extra), seeds)
  rows = []
  for t, p in zip(check.ts, paths):
    obs, exp = observed(p), math.nan
    if rows:
      exp = math.log(obs / rows[-1].observed) / math.log(t / rows[-1].t)
    rows.append(Row(t, obs, check.bound(t, p), exp))
  return rows, paths[len(check.ts) :]


def counterexample_runs(check: Check) -> list[tuple[int, dict]]:
  """The counterexample runs that share ``check``'s sweep."""
  if check is FEDGM_51:
    return [(BAD_51['T'], {k: BAD_51[k] for k in ('client_lr', 'server_lr')})]
  if check is FEDFA_1:
    return [(BAD_FA['T'], fedfa_rates(rho)) for rho in BAD_FA['rho']]
  return []


def everything(seeds: int = SEEDS) -> dict:
  """Every table and counterexample of docs/theory.md."""
  out = {}
  for check in CHECKS:
    out[check.theorem], more = measure(check, counterexample_runs(check), seeds)
    if check is FEDGM_51:
      out['FedGM Thm 5.1 counterexample'] = (observed(more[0]), final(more[0]))
    if check is FEDFA_1:
      out['FedFa Thm 1 counterexample'] = [
        (observed(p), final(p), fedfa_bound(BAD_FA['T'], p, rho))
        for rho, p in zip(BAD_FA['rho'], more)
      ]
  return out


# ---- the page --------------------------------------------------------------------------------
def _g(x: float) -> str:
  return '—' if math.isnan(x) else f'{x:.3g}'


def markdown(results: dict) -> str:
  """The tables of docs/theory.md."""
  lines = []
  for check in CHECKS:
    lines += [f'**{check.theorem}** (`{check.algorithm}`, theorem rate {check.rate:+.2f})', '']
    lines += ['| T | observed | bound | ratio | fitted exponent |', '|---|---|---|---|---|']
    for r in results[check.theorem]:
      ratio = r.observed / r.bound
      lines.append(f'| {r.t} | {_g(r.observed)} | {_g(r.bound)} | {_g(ratio)} | {_g(r.exponent)} |')
    lines.append('')
  t, lr, eta = BAD_51['T'], BAD_51['client_lr'], BAD_51['server_lr']
  cond = fedgm_51_conditions(eta, lr, every_client(t, K_GM, TAU_51))
  obs, last = results['FedGM Thm 5.1 counterexample']
  lines += [
    f'**FedGM Thm 5.1 counterexample** (T = {t}, eta_l = {lr:.4g}, eta = {eta:g}):',
    '',
    '| condition | left side / limit |',
    '|---|---|',
    *(f'| {name} | {value:.3g} |' for name, value in cond.items()),
    '',
    f'observed {_g(obs)} (last ‖grad f‖² {_g(last)}), bound {_g(fedgm_51_bound(t, eta, lr))}.',
    '',
    f'**FedFa Thm 1 counterexample** (T = {BAD_FA["T"]}, tau_max = '
    f'{fedfa_tau_max(round_robin(BAD_FA["T"], Q_FA))}; ‖grad f(x_0)‖² = '
    f'{_g(float(PROBLEM.grad_norm2(X0)))}):',
    '',
    '| eta_g eta_l Q L | observed | last ‖grad f‖² | bound (G measured) |',
    '|---|---|---|---|',
  ]
  for rho, (obs, last, bound) in zip(BAD_FA['rho'], results['FedFa Thm 1 counterexample']):
    lines.append(f'| {rho:g} | {_g(obs)} | {_g(last)} | {_g(bound)} |')
  return '\n'.join(lines) + '\n'


BEGIN, END = '<!-- scripts/theory.py: begin -->\n', '<!-- scripts/theory.py: end -->\n'
PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'docs', 'theory.md')


def write(page: str, tables: str) -> None:
  """Replace the block between BEGIN and END of ``page`` (a temp file, then a rename)."""
  with open(page) as f:
    text = f.read()
  if BEGIN not in text or END not in text:
    raise SystemExit(f'{page} has no {BEGIN.strip()} ... {END.strip()} block to replace.')
  head, rest = text.split(BEGIN, 1)
  tail = rest.split(END, 1)[1]
  workdir_lib.write_text(page, head + BEGIN + tables + END + tail)


_WRITE = flags.DEFINE_bool('write', False, 'Replace the tables in docs/theory.md.')


def main(argv: list[str]) -> None:
  del argv  # cli.flags_parser refuses stray arguments
  start = time.time()
  tables = markdown(everything())
  print(tables + f'\n({time.time() - start:.0f} s)')
  if _WRITE.value:
    write(PAGE, tables)


if __name__ == '__main__':
  cli.run(main)
