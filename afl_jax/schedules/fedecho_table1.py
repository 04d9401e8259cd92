"""FedEcho's delay model (Table 1, Sec. 5) on FedBuff's event clock (docs/algorithms/fedecho.md,
"Delay model (Table 1)")."""

from __future__ import annotations

import dataclasses

import numpy as np

from afl_jax import checks
from afl_jax.schedules import builders
from afl_jax.schedules.durations import Durations
from afl_jax.schedules.schedule import Schedule

TABLE_1 = {
  'large': ((1.0, 2.0), (3.0, 5.0), (50.0, 80.0)),
  'mild': ((1.0, 2.0), (3.0, 5.0), (10.0, 20.0)),
}
MAX_LONG_FRACTION = 0.1  # "no more than 10% of the clients" in the long group


def runtime_categories(
  num_samples: np.ndarray, *, gamma: float, fractions: tuple[float, float, float], seed: int = 0
) -> np.ndarray:
  """int[N] category per client (0 short, 1 medium, 2 long): Gumbel-top-k on ``n_i / (gamma
  mean(n))`` (``gamma`` and ``fractions`` checked by :func:`schedule`)."""
  n_i = np.asarray(num_samples, np.float64)
  if n_i.ndim != 1 or n_i.size < 1 or (n_i < 0).any():
    raise ValueError(
      f'num_samples must be a non-empty 1-D array of counts >= 0; got shape {n_i.shape}.'
    )
  fr, n = np.asarray(fractions, np.float64), n_i.size
  num_long, num_medium = int(np.floor(fr[2] * n)), int(np.floor(fr[1] * n))
  score = n_i / (gamma * max(n_i.mean(), 1e-12)) + np.random.default_rng(seed).gumbel(size=n)
  order = np.argsort(-score, kind='stable')
  cat = np.zeros(n, np.int32)
  cat[order[:num_long]] = 2
  cat[order[num_long : num_long + num_medium]] = 1
  return cat


@dataclasses.dataclass(frozen=True)
class PerClientUniform(Durations):
  """Durations U(low[i], high[i]) per client i; ``params`` are the overall (min low, max high)."""

  low: np.ndarray | None = None
  high: np.ndarray | None = None
  category: np.ndarray | None = None

  def sample(self, rng: np.random.Generator, ids: np.ndarray) -> np.ndarray:
    u = rng.uniform(0.0, 1.0, size=ids.shape)
    return self.low[ids] + (self.high[ids] - self.low[ids]) * u


def durations(
  num_samples: np.ndarray, *, delay: str, unit: float, **categories
) -> PerClientUniform:
  """Table 1 durations of clients with ``num_samples`` samples (checked by :func:`schedule`)."""
  cat = runtime_categories(num_samples, **categories)
  table = np.asarray(TABLE_1[delay]) * unit  # per-client [low, high] of its category, seconds
  low, high = table[cat, 0], table[cat, 1]
  overall = {'low': float(low.min()), 'high': float(high.max())}
  return PerClientUniform('uniform', overall, low=low, high=high, category=cat)


def _fractions_problem(fractions) -> str | None:
  fr = np.asarray(fractions, np.float64)
  if fr.shape != (3,) or not np.isclose(fr.sum(), 1.0):
    return 'must be three shares (short, medium, long) >= 0 summing to 1'
  if fr[2] > MAX_LONG_FRACTION:
    return f'must give the long group (fractions[2]) at most {MAX_LONG_FRACTION}'
  return None


@builders.BUILDERS.register(
  'fedecho',
  delay=checks.choice(TABLE_1),
  unit=checks.POSITIVE,
  gamma=checks.POSITIVE,
  fractions=checks.reals(0.0, 1.0),
  rules=(checks.Rule('fractions', _fractions_problem),),
)
def schedule(
  num_samples: np.ndarray,
  concurrency: int,
  buffer_size: int,
  num_steps: int,
  *,
  delay: str = 'large',
  unit: float = 10.0,
  gamma: float = 1.0,
  fractions: tuple[float, float, float] = (0.6, 0.3, 0.1),
  local_steps=1,
  seed: int = 0,
) -> Schedule:
  """FedBuff's event clock with Table 1 delays (Sec. 5.1: N = 50, Mc = 25, M = 5): ``delay``
  'large' or 'mild', ``unit`` seconds; ``gamma`` and ``fractions`` set the runtime categories."""
  table1 = {'delay': delay, 'unit': unit, 'gamma': gamma, 'fractions': fractions}
  dur = durations(num_samples, seed=seed, **table1)
  clock = {'durations': dur, 'local_steps': local_steps, 'seed': seed}
  return builders.fedbuff(len(dur.low), concurrency, buffer_size, num_steps, **clock)
