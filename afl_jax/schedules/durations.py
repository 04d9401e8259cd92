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

# Normal draws are clipped here so that no job takes zero or negative time.
MIN_DURATION = 1e-6


# Each family's parameters (in the order NumPy's generator method of that name takes
# them), their valid range and its check, in one place.
_FAMILIES = {
  'constant': (('value',), 'value >= 0', lambda p: p['value'] >= 0),
  'uniform': (('low', 'high'), '0 <= low <= high', lambda p: 0 <= p['low'] <= p['high']),
  'exponential': (('mean',), 'mean > 0', lambda p: p['mean'] > 0),
  'normal': (('mean', 'std'), 'std >= 0', lambda p: p['std'] >= 0),
  'lognormal': (('mu', 'sigma'), 'sigma >= 0', lambda p: p['sigma'] >= 0),
  'pareto': (
    ('shape', 'scale'),
    'shape > 0 and scale > 0',
    lambda p: p['shape'] > 0 and p['scale'] > 0,
  ),
}

KINDS: tuple[str, ...] = tuple(_FAMILIES)  # the duration families

# Ways to derive the per-client ``speed`` factors (see :func:`speed_factors`).
CLIENT_SPEEDS = ('none', 'local_steps', 'lognormal')


@dataclasses.dataclass(frozen=True)
class Durations:
  """A duration distribution, optionally scaled per client.

  Attributes:
    kind: one of 'constant', 'uniform', 'exponential', 'normal', 'lognormal', 'pareto'.
    params: the distribution's parameters (see ``_FAMILIES``): uniform(low, high),
      exponential(mean), normal(mean, std) truncated at 1e-6, lognormal(mu, sigma)
      of the underlying normal, pareto(shape, scale) with support [scale, inf).
    speed: optional float[N], per-client multiplier of every draw.
  """

  kind: str
  params: dict
  speed: np.ndarray | None = None

  def __post_init__(self):
    if self.kind not in _FAMILIES:
      raise ValueError(f'durations kind {self.kind!r} is unknown; valid: {sorted(_FAMILIES)}.')
    names, rule, valid = _FAMILIES[self.kind]
    if set(self.params) != set(names):
      raise ValueError(
        f'durations {self.kind!r} takes parameters {sorted(names)}; got {sorted(self.params)}.'
      )
    if not valid(self.params):
      raise ValueError(
        f'durations {self.kind!r} has invalid parameters {self.params}: need {rule}.'
      )
    if self.speed is not None:
      speed = np.asarray(self.speed, np.float64)
      if speed.ndim != 1 or not (speed > 0).all():
        raise ValueError('durations speed must be a 1-D array of positive per-client factors.')
      object.__setattr__(self, 'speed', speed)

  def sample(self, rng: np.random.Generator, ids: np.ndarray) -> np.ndarray:
    """Unscaled durations, one per entry of ``ids`` (the family's draw)."""
    p = [self.params[k] for k in _FAMILIES[self.kind][0]]
    if self.kind == 'constant':
      return np.full(ids.shape, float(p[0]))
    if self.kind == 'pareto':  # numpy's pareto is Lomax; shifted to Pareto on [scale, inf)
      return (rng.pareto(p[0], size=ids.shape) + 1.0) * p[1]
    d = getattr(rng, self.kind)(*p, size=ids.shape)
    return np.maximum(d, MIN_DURATION) if self.kind == 'normal' else d

  def draw(self, rng: np.random.Generator, client_ids: np.ndarray) -> np.ndarray:
    """One duration per entry of ``client_ids`` (float64, same shape), times its speed."""
    ids = np.asarray(client_ids)
    d = self.sample(rng, ids)
    if self.speed is None:
      return d
    if ids.size and ids.max() >= self.speed.shape[0]:
      raise ValueError(
        f'durations speed has {self.speed.shape[0]} entries but client id {ids.max()} was drawn.'
      )
    return d * self.speed[ids]


def make(kind: str, speed: np.ndarray | None = None, **params: float) -> Durations:
  """``make('uniform', low=0, high=20)``: a duration model by name."""
  return Durations(kind, dict(params), speed)


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
