"""The MasFL / AdaMasFL client: local momentum with a stale control-variate correction.

Yan, Zhong, Wang, Zhang, "Momentum-Driven Adaptivity: Towards Tuning-Free
Asynchronous Federated Learning" (papers/000). Algorithm 2 (MasFL) and Algorithm 4
(AdaMasFL), for client i whose job is consumed at server step t with staleness tau:

* line 1: receive ``theta^{t-tau}`` and ``d^{t-tau} = beta c^{t-tau} + (1-beta) g^{t-tau}``
  (the server's broadcast, :class:`MasFLBroadcast`); ``theta_i^{t,0} = theta^{t-tau}``;
* line 3: ``g_i^{t,k} = beta (grad F(theta_i^{t,k}; xi) - c~_i^t + c^{t-tau})
  + (1-beta) g^{t-tau} = beta (grad - c~_i^t) + d^{t-tau}``;
* line 4 (MasFL): ``theta_i^{t,k+1} = theta_i^{t,k} - eta g_i^{t,k}``;
  line 4 (AdaMasFL): ``theta_i^{t,k+1} = theta_i^{t,k} - eta g_i^{t,k} / ||g_i^{t,k}||``
  (global l2 norm over the pytree; no step when ``||g|| = 0``, never a NaN);
* line 6: send ``c~_i^{t+1} = (1/K) sum_k grad F(theta_i^{t,k}; xi_i^{t,k})``; AdaMasFL
  also sends ``Delta_i^t = (theta^{t-tau} - theta_i^{t,K}) / (eta K)``.

``c~_i^t`` is the variate this client itself last sent (its client state; SPEC_NOTES),
``c_i^0`` before its first report. :func:`masfl_client`'s ``init`` computes that
``c_i^0 = (1/K) sum_{k<K} grad F(theta^0; xi_i^{-1,k})`` (Alg. 1/3 line 1): K
stochastic gradients all taken at ``theta^0``. With heterogeneous ``K_{t,i}`` the
means and the AdaMasFL scaling use this job's own ``K_{t,i}``.

Sign convention: AdaMasFL's ``Delta`` is ``x_start - x_local`` (scaled), as every
message in the library; the server moves ``theta <- theta - gamma * mean(Delta)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from afl_jax.clients.sgd import run_local_steps
from afl_jax.core import tree
from afl_jax.core.types import ClientRule, LocalTask, Params


class MasFLBroadcast(NamedTuple):
  """What the MasFL server sends (Alg. 1 line 8 / Alg. 3 line 9)."""

  params: Params  # theta^t
  direction: Params  # d^t = beta c^t + (1 - beta) g^t


class MasFLMessage(NamedTuple):
  """What a MasFL client sends (Alg. 2 line 6 / Alg. 4 line 6)."""

  variate: Params  # c~_i^{t+1}: mean of the job's K stochastic gradients
  delta: Params | None  # AdaMasFL: (theta_start - theta_K) / (eta K); MasFL: None


class MasFLClientState(NamedTuple):
  variate: Params  # c~_i: the variate this client last sent (c_i^0 before its first report)


def _check(client_lr: float, beta: float) -> None:
  if not client_lr > 0:
    raise ValueError(f'client_lr (eta) must be > 0; got {client_lr}.')
  if not 0 < beta <= 1:
    raise ValueError(f'beta must be in (0, 1]; got {beta}.')


def _num_steps(task: LocalTask) -> jax.Array:
  """K_{t,i} as actually run (at least 1, so a mean is always defined)."""
  return jnp.maximum(jnp.minimum(task.num_steps, task.max_steps), 1)


def initial_variate(params: Params, task: LocalTask, key: jax.Array) -> Params:
  """c_i^0: the mean of K_i stochastic gradients all taken at ``params`` (Alg. 1 line 1).

  Step k draws its batch with ``fold_in(key, k)``; steps ``k >= task.num_steps`` are
  masked out exactly as in the local loop.
  """

  def body(total, batch, k):
    del k
    loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
    return tree.add(total, g), loss

  total, _ = run_local_steps(task, key, tree.zeros_like(params), body)
  return tree.scale(1.0 / _num_steps(task), total)


def normalized(g: Params) -> Params:
  """``g / ||g||`` with the global l2 norm, and 0 (no step) when ``||g|| = 0``."""
  norm = tree.global_norm(g)
  safe = jnp.where(norm > 0, norm, 1.0)
  return tree.scale(jnp.where(norm > 0, 1.0 / safe, 0.0), g)


def masfl_client(client_lr: float, beta: float, *, normalize: bool = False) -> ClientRule:
  """MasFL's local rule (Alg. 2), or AdaMasFL's (Alg. 4) with ``normalize=True``.

  Args:
    client_lr: eta, the local step size.
    beta: the momentum parameter (weight of the corrected fresh gradient).
    normalize: AdaMasFL: normalized local steps, and ``Delta`` in the message.

  Returns:
    A :class:`ClientRule`; ``update(start, state, task, key)`` takes a
    :class:`MasFLBroadcast` and returns a :class:`MasFLMessage`.
  """
  _check(client_lr, beta)

  def init(params: Params, task: LocalTask, key: jax.Array) -> MasFLClientState:
    return MasFLClientState(initial_variate(params, task, key))

  def update(
    start: MasFLBroadcast, state: MasFLClientState, task: LocalTask, key: jax.Array
  ) -> tuple[MasFLMessage, MasFLClientState, dict[str, Any]]:
    def body(carry, batch, k):
      del k
      params, grad_sum = carry
      loss, grad = jax.value_and_grad(task.loss_fn)(params, batch)
      # Alg. 2/4 line 3: beta (grad - c~_i + c^{t-tau}) + (1 - beta) g^{t-tau}.
      g = tree.axpy(beta, tree.sub(grad, state.variate), start.direction)
      step = normalized(g) if normalize else g
      return (tree.axpy(-client_lr, step, params), tree.add(grad_sum, grad)), loss

    carry0 = (start.params, tree.zeros_like(start.params))
    (final, grad_sum), metrics = run_local_steps(task, key, carry0, body)
    k = _num_steps(task)
    variate = tree.scale(1.0 / k, grad_sum)
    delta = None
    if normalize:
      delta = tree.scale(1.0 / (client_lr * k), tree.sub(start.params, final))
    return MasFLMessage(variate, delta), MasFLClientState(variate), metrics

  return ClientRule(init, update)


def adamasfl_client(client_lr: float, beta: float) -> ClientRule:
  """AdaMasFL's local rule (Alg. 4): normalized momentum steps, sends Delta and c~."""
  return masfl_client(client_lr, beta, normalize=True)
