"""Job-duration models for the simulated clock (host-side NumPy).

A :class:`Durations` draws the wall-clock time of each client job. The families
are those used by the papers: uniform U(0, 20) (MasFL, FedBuff), exponential,
truncated normal (AsynFL, per-client mean), log-normal and Pareto (long-tailed
delays of FedFa). A per-client ``speed`` factor (>0, larger = slower) multiplies
every draw of that client, which gives persistent stragglers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

_PARAMS = {
  'constant': ('value',),
  'uniform': ('low', 'high'),
  'exponential': ('mean',),
  'normal': ('mean', 'std'),
  'lognormal': ('mu', 'sigma'),
  'pareto': ('shape', 'scale'),
}

KINDS: tuple[str, ...] = tuple(_PARAMS)  # the duration families

# Normal draws are clipped here so that no job takes zero or negative time.
MIN_DURATION = 1e-6

# Ways to derive the per-client ``speed`` factors (see :func:`speed_factors`).
CLIENT_SPEEDS = ('none', 'local_steps', 'lognormal')


@dataclasses.dataclass(frozen=True)
class Durations:
  """A duration distribution, optionally scaled per client.

  Attributes:
    kind: one of 'constant', 'uniform', 'exponential', 'normal', 'lognormal', 'pareto'.
    params: the distribution's parameters (see ``_PARAMS``): uniform(low, high),
      exponential(mean), normal(mean, std) truncated at 1e-6, lognormal(mu, sigma)
      of the underlying normal, pareto(shape, scale) with support [scale, inf).
    speed: optional float[N], per-client multiplier of every draw.
  """

  kind: str
  params: dict
  speed: np.ndarray | None = None

  def __post_init__(self):
    if self.kind not in _PARAMS:
      raise ValueError(f'durations kind {self.kind!r} is unknown; valid: {sorted(_PARAMS)}.')
    expected = set(_PARAMS[self.kind])
    if set(self.params) != expected:
      raise ValueError(
        f'durations {self.kind!r} takes parameters {sorted(expected)}; got {sorted(self.params)}.'
      )
    p = self.params
    checks = {
      'constant': p.get('value', 1) >= 0,
      'uniform': 0 <= p.get('low', 0) <= p.get('high', 0),
      'exponential': p.get('mean', 1) > 0,
      'normal': p.get('std', 1) >= 0,
      'lognormal': p.get('sigma', 1) >= 0,
      'pareto': p.get('shape', 1) > 0 and p.get('scale', 1) > 0,
    }
    if not checks[self.kind]:
      raise ValueError(
        f'durations {self.kind!r} has invalid parameters {p}: need {_RANGES[self.kind]}.'
      )
    if self.speed is not None:
      speed = np.asarray(self.speed, np.float64)
      if speed.ndim != 1 or not (speed > 0).all():
        raise ValueError('durations speed must be a 1-D array of positive per-client factors.')
      object.__setattr__(self, 'speed', speed)

  def draw(self, rng: np.random.Generator, client_ids: np.ndarray) -> np.ndarray:
    """One duration per entry of ``client_ids`` (float64, same shape)."""
    ids = np.asarray(client_ids)
    shape = ids.shape
    p = self.params
    if self.kind == 'constant':
      d = np.full(shape, float(p['value']))
    elif self.kind == 'uniform':
      d = rng.uniform(p['low'], p['high'], size=shape)
    elif self.kind == 'exponential':
      d = rng.exponential(p['mean'], size=shape)
    elif self.kind == 'normal':
      d = np.maximum(rng.normal(p['mean'], p['std'], size=shape), MIN_DURATION)
    elif self.kind == 'lognormal':
      d = rng.lognormal(p['mu'], p['sigma'], size=shape)
    else:  # pareto: numpy's pareto is Lomax; shift to classic Pareto on [scale, inf).
      d = (rng.pareto(p['shape'], size=shape) + 1.0) * p['scale']
    if self.speed is not None:
      if ids.size and ids.max() >= self.speed.shape[0]:
        raise ValueError(
          f'durations speed has {self.speed.shape[0]} entries but client id {ids.max()} was drawn.'
        )
      d = d * self.speed[ids]
    return d


_RANGES = {
  'constant': 'value >= 0',
  'uniform': '0 <= low <= high',
  'exponential': 'mean > 0',
  'normal': 'std >= 0',
  'lognormal': 'sigma >= 0',
  'pareto': 'shape > 0 and scale > 0',
}


def make(kind: str, speed: np.ndarray | None = None, **params: float) -> Durations:
  """``make('uniform', low=0, high=20)``: a duration model by name."""
  return Durations(kind, dict(params), speed)


def constant(value: float = 1.0) -> Durations:
  return Durations('constant', {'value': value})


def uniform(low: float, high: float, speed=None) -> Durations:
  return Durations('uniform', {'low': low, 'high': high}, speed)


def speed_factors(
  kind: str, local_steps: np.ndarray, *, sigma: float = 0.5, seed: int = 0
) -> np.ndarray | None:
  """float[N] per-client ``speed`` factors, or None for ``'none'``.

  ``'local_steps'``: ``K_i / mean(K)``, a job takes longer in proportion to its local
  work. ``'lognormal'``: ``exp(sigma * z_i)``, a persistent random device speed drawn
  from its own stream of ``seed``, so the duration draws themselves are unchanged.
  """
  if kind not in CLIENT_SPEEDS:
    raise ValueError(f'client speed must be one of {CLIENT_SPEEDS}; got {kind!r}.')
  k = np.asarray(local_steps, np.float64)
  if kind == 'none':
    return None
  if kind == 'local_steps':
    return k / k.mean()
  if not sigma > 0:
    raise ValueError(f'lognormal client speed needs sigma > 0; got {sigma}.')
  rng = np.random.default_rng([seed, 0x5EED])
  return np.exp(sigma * rng.standard_normal(k.shape[0]))
