"""Problems: :func:`from_loss` from any loss, and least-squares problems ``f_i(x) = 0.5 ||A_i x -
b_i||^2`` (optional gradient noise of variance ``sigma^2``) with the constants the papers'
theorems are stated in (docs/theory.md)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afl_jax.core.problem import Problem, from_loss
from afl_jax.errors import ArgumentError


def quadratic_loss(params: Any, batch: dict) -> jax.Array:
  """``0.5 ||a x - b||^2`` (+ ``<xi, x>`` when the batch carries noise ``'xi'``)."""
  r = batch['a'] @ params['x'] - batch['b']
  loss = 0.5 * jnp.sum(r * r)
  return loss + jnp.dot(batch['xi'], params['x']) if 'xi' in batch else loss


@dataclasses.dataclass(frozen=True, eq=False)
class Quadratic:
  """A quadratic problem and its constants (float64, on the host)."""

  problem: Problem
  L: float  # the largest eigenvalue of any A_i^T A_i (every f_i is L-smooth)
  mu: float  # the smallest eigenvalue of f's Hessian (0 if singular)
  sigma2: float  # E||g - grad f_i(x)||^2 of a stochastic gradient, every x
  sigma_g2: float  # sup_x (1/N) sum_i ||grad f_i(x) - grad f(x)||^2; inf unless one Hessian
  f_star: float  # min f
  x_star: np.ndarray  # float64[d], the minimizer of f
  hessians: np.ndarray  # float64[N, d, d], A_i^T A_i
  linears: np.ndarray  # float64[N, d], A_i^T b_i: grad f_i(x) = hessians[i] x - linears[i]

  @property
  def hessian(self) -> np.ndarray:
    return self.hessians.mean(0)

  def grad_norm2(self, x: Any) -> Any:
    """``||grad f(x)||^2`` for x of shape [..., d] (NumPy or JAX)."""
    g = x @ self.hessian - self.linears.mean(0)
    return (g * g).sum(-1)

  def client_grad_norm2(self, x: Any) -> np.ndarray:
    """``||grad f_i(x)||^2`` of every client, [..., N] for x of shape [..., d]."""
    g = np.einsum('...d,nde->...ne', x, self.hessians) - self.linears
    return (g * g).sum(-1)

  def gap(self, x: Any) -> Any:
    """``f(x) - f*`` for x of shape [..., d]: ``0.5 (x - x*)^T H (x - x*)``."""
    e = x - self.x_star
    return 0.5 * ((e @ self.hessian) * e).sum(-1)

  def eval_fn(self, params: Any) -> dict[str, Any]:
    """An ``eval_fn``: ``{'grad_norm2': ||grad f(x)||^2, 'gap': f(x) - f*}``."""
    x = params['x']
    return {'grad_norm2': self.grad_norm2(x), 'gap': self.gap(x)}


def _finite(name: str, x: Any, where: str) -> np.ndarray:
  try:
    out = np.asarray(x, np.float64)
  except (TypeError, ValueError):
    out = np.asarray([np.nan])
  if not np.isfinite(out).all():
    raise ArgumentError(
      f'{name} is invalid: must be finite numbers; it holds {float(out[~np.isfinite(out)][0])} '
      f'(afl_jax.problems.{where}).'
    )
  return out


def _sigma(sigma: Any, where: str) -> None:
  if not (isinstance(sigma, int | float | np.number) and math.isfinite(sigma) and sigma >= 0):
    raise ArgumentError(
      f'sigma={sigma!r} is invalid: must be a finite number >= 0 (afl_jax.problems.{where}).'
    )


def quadratic(a: Any, b: Any, *, sigma: float = 0.0) -> Quadratic:
  """Client i has ``f_i(x) = 0.5 ||a[i] x - b[i]||^2`` on its full data (a: [N, n, d], b: [N, n],
  their dtype kept); ``sigma``: the gradient noise's standard deviation (0: exact gradients)."""
  a64, b64 = _finite('a', a, 'quadratic'), _finite('b', b, 'quadratic')
  if a64.ndim != 3 or b64.shape != a64.shape[:2]:
    raise ArgumentError(
      f'a must have shape [N, n, d] and b [N, n]; got {a64.shape} and {b64.shape} '
      '(afl_jax.problems.quadratic).'
    )
  _sigma(sigma, 'quadratic')
  problem = from_loss(quadratic_loss, {'a': jnp.asarray(a), 'b': jnp.asarray(b)})
  dim = a64.shape[-1]
  if sigma > 0:
    scale = sigma / math.sqrt(dim)

    xi = lambda key, dtype: scale * jax.random.normal(key, (dim,), dtype)
    noisy = lambda _, view, key: {**view, 'xi': xi(key, view['b'].dtype)}
    problem = problem.replace(sample_fn=noisy)
  hessians = np.einsum('nrd,nre->nde', a64, a64)
  linears = np.einsum('nrd,nr->nd', a64, b64)
  hessian, linear = hessians.mean(0), linears.mean(0)
  x_star = np.linalg.lstsq(hessian, linear, rcond=None)[0]
  r = np.einsum('nrd,d->nr', a64, x_star) - b64
  shared = np.allclose(hessians, hessians[:1], rtol=1e-12, atol=0.0)
  spread = linears - linear
  lipschitz = float(np.linalg.eigvalsh(hessians)[:, -1].max())
  mu = float(max(np.linalg.eigvalsh(hessian)[0], 0.0))
  sigma_g2 = float((spread * spread).sum(-1).mean()) if shared else math.inf
  f_star = float(0.5 * (r * r).sum(-1).mean())
  args = (lipschitz, mu, float(sigma) ** 2, sigma_g2, f_star, x_star, hessians, linears)
  return Quadratic(problem, *args)


def shifted_quadratic(eigenvalues: Any, centers: Any, *, sigma: float = 0.0) -> Quadratic:
  """``f_i(x) = 0.5 (x - c_i)^T diag(eigenvalues) (x - c_i)`` for N centers [N, d]: ``x* = mean_i
  c_i`` and "bounded global variance" holds with equality at every x."""
  where = 'shifted_quadratic'
  lam, c = _finite('eigenvalues', eigenvalues, where), _finite('centers', centers, where)
  if lam.ndim != 1 or (lam <= 0).any() or c.ndim != 2 or c.shape[1] != lam.size:
    raise ArgumentError(
      f'need eigenvalues > 0 of shape [d] and centers of shape [N, d]; got {lam.shape}, '
      f'{c.shape} (afl_jax.problems.shifted_quadratic).'
    )
  _sigma(sigma, where)
  root = np.sqrt(lam)
  a = np.broadcast_to(np.diag(root), (c.shape[0], lam.size, lam.size))
  return quadratic(a, c * root, sigma=sigma)


__all__ = ['Problem', 'Quadratic', 'from_loss', 'quadratic', 'quadratic_loss', 'shifted_quadratic']
