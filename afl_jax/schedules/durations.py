"""Job-duration distributions of the simulated clock and per-client ``speed`` factors (> 0,
larger = slower) for persistent stragglers (docs/configs.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from afl_jax import checks
from afl_jax.registry import Registry

MIN_DURATION = 1e-6  # normal draws are clipped here: no job takes zero or negative time
# Each distribution's parameters are its keyword arguments; it returns ``draw(rng, shape)``.
DISTRIBUTIONS = Registry(
  'durations distribution', section='schedule.durations_params', name_field='schedule.durations'
)
Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


@DISTRIBUTIONS.register('constant', value=checks.real(0.0))
def constant(value: float) -> Sampler:
  return lambda rng, shape: np.full(shape, float(value))


@DISTRIBUTIONS.register('uniform', low=checks.real(0.0), high=checks.real('low'))
def uniform(low: float = 0.0, high: float = 20.0) -> Sampler:
  return lambda rng, shape: rng.uniform(float(low), float(high), size=shape)


@DISTRIBUTIONS.register('exponential', mean=checks.POSITIVE)
def exponential(mean: float) -> Sampler:
  return lambda rng, shape: rng.exponential(float(mean), size=shape)


@DISTRIBUTIONS.register('normal', std=checks.NON_NEGATIVE)
def normal(mean: float, std: float) -> Sampler:
  """Normal(mean, std) truncated at :data:`MIN_DURATION`."""
  return lambda rng, shape: np.maximum(
    rng.normal(float(mean), float(std), size=shape), MIN_DURATION
  )


@DISTRIBUTIONS.register('lognormal', sigma=checks.NON_NEGATIVE)
def lognormal(mu: float, sigma: float) -> Sampler:
  return lambda rng, shape: rng.lognormal(float(mu), float(sigma), size=shape)


@DISTRIBUTIONS.register('pareto', shape=checks.POSITIVE, scale=checks.POSITIVE)
def pareto(shape: float, scale: float) -> Sampler:
  """Pareto with support [scale, inf) (NumPy's ``pareto`` is Lomax, shifted here)."""
  return lambda rng, size: (rng.pareto(float(shape), size=size) + 1.0) * float(scale)


CLIENT_SPEEDS = ('none', 'local_steps', 'lognormal')


@dataclasses.dataclass(frozen=True)
class Durations:
  """Distribution ``kind`` with ``params`` (checked, defaults filled); client i's draws times
  ``speed[i]``."""

  kind: str
  params: dict
  speed: np.ndarray | None = None
  _draw: Sampler | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

  def __post_init__(self):
    bound = DISTRIBUTIONS.bind(self.kind, dict(self.params), in_config=False)
    object.__setattr__(self, 'params', bound)
    object.__setattr__(self, '_draw', DISTRIBUTIONS.make(self.kind, **bound))
    if self.speed is not None:
      speed = np.asarray(self.speed, np.float64)
      if speed.ndim != 1 or not (speed > 0).all():
        raise ValueError('durations speed must be a 1-D array of positive per-client factors.')
      object.__setattr__(self, 'speed', speed)

  def sample(self, rng: np.random.Generator, ids: np.ndarray) -> np.ndarray:
    return self._draw(rng, ids.shape)

  def draw(self, rng: np.random.Generator, client_ids: np.ndarray) -> np.ndarray:
    """One duration per entry of ``client_ids``, times its client's speed."""
    ids = np.asarray(client_ids)
    d = self.sample(rng, ids)
    if self.speed is not None and ids.size and ids.max() >= self.speed.shape[0]:
      raise ValueError(
        f'durations speed has {self.speed.shape[0]} entries but client id {ids.max()} was drawn.'
      )
    return d if self.speed is None else d * self.speed[ids]


def make(kind: str, speed: np.ndarray | None = None, **params: float) -> Durations:
  return Durations(kind, dict(params), speed)


def speed_factors(
  kind: str, local_steps: np.ndarray, *, sigma: float = 0.5, seed: int = 0
) -> np.ndarray | None:
  """float[N]: None (``'none'``), ``K_i / mean(K)`` (``'local_steps'``) or ``exp(sigma z_i)`` from
  its own stream of ``seed`` (``'lognormal'``); the settings checked by the schedule taking
  them (``client_speed``, ``client_speed_sigma``)."""
  k = np.asarray(local_steps, np.float64)
  if kind == 'lognormal':
    return np.exp(sigma * np.random.default_rng([seed, 0x5EED]).standard_normal(k.shape[0]))
  return {'none': None, 'local_steps': k / k.mean()}[kind]
