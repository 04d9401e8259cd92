"""A researcher's own components, registered with afl_jax (docs/extending.md).

Nothing here lives in the package: a config file names this module (``my_config.py``
imports it with ``import_beside``), and importing it registers

* (a) ``fedbuff_adam``: FedBuff's buffer with a staleness-scaled Adam server rule;
* (b) ``fedbuff_clip``: FedBuff's server with a new client rule, clipped local SGD;
* (c) the flax model ``tiny_mlp``;
* (d) the dataset ``blobs``, built from NumPy arrays;
* (h) the compressor ``residual_sign``: the scaled sign of the message plus what earlier
  messages did not send (its state).
"""

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax

import afl_jax
from afl_jax import checks
from afl_jax.core.types import EmptyState, unchanged_if_no_arrival


# ---- (a) a server rule -----------------------------------------------------------------------
class AdamServerState(NamedTuple):
  params: Any  # the global model (ServerRule's default params() reads this field)
  opt_state: Any


def staleness_adam_server(server_lr: float, a: float) -> afl_jax.ServerRule:
  """g_t = (1/|S_t|) sum_{i in S_t} (1 + tau_i)^(-a) Delta_i, then one Adam step on g_t."""
  optimizer = optax.adam(server_lr)

  def init(params):
    return AdamServerState(params, optimizer.init(params))

  def update(state, messages, arrivals, key):
    del key
    valid = arrivals.mask.astype(jnp.float32)
    scale = valid * (1.0 + arrivals.staleness.astype(jnp.float32)) ** (-a)
    weights = scale / jnp.maximum(valid.sum(), 1.0)  # padded slots weigh 0
    g = jax.tree.map(lambda m: jnp.tensordot(weights.astype(m.dtype), m, axes=1), messages)
    updates, opt_state = optimizer.update(g, state.opt_state, state.params)
    new = AdamServerState(optax.apply_updates(state.params, updates), opt_state)
    # A step with no arrival must leave the server as it was (no Adam step on nothing).
    metrics = {'mean_scale': scale.sum() / jnp.maximum(valid.sum(), 1.0)}
    return unchanged_if_no_arrival(arrivals, new, state), metrics

  return afl_jax.ServerRule(init, update)


@afl_jax.algorithms.register('fedbuff_adam', a=checks.NON_NEGATIVE)
def fedbuff_adam(client_lr: float = 0.05, server_lr: float = 0.01, a: float = 0.5):
  """Local SGD on the clients, the staleness-scaled Adam server above."""
  return afl_jax.Algorithm(
    'fedbuff_adam', afl_jax.clients.local_sgd(client_lr), staleness_adam_server(server_lr, a)
  )


# ---- (b) a client rule -----------------------------------------------------------------------
def clipped_sgd(client_lr: float, max_norm: float) -> afl_jax.ClientRule:
  """K local steps of SGD with the gradient clipped to norm ``max_norm``; sends
  Delta = x_start - x_K (the convention of every client rule)."""

  def init(params, task, key):
    return EmptyState()  # no per-client state

  def update(start, state, task, key):
    def body(params, batch, k):
      loss, g = jax.value_and_grad(task.loss_fn)(params, batch)
      scale = jnp.minimum(1.0, max_norm / (optax.global_norm(g) + 1e-12))
      return jax.tree.map(lambda p, gi: p - client_lr * scale * gi, params, g), loss

    final, metrics = afl_jax.clients.run_local_steps(task, key, start, body)
    return jax.tree.map(jnp.subtract, start, final), state, metrics

  return afl_jax.ClientRule(init, update)


@afl_jax.algorithms.register('fedbuff_clip', max_norm=checks.POSITIVE)
def fedbuff_clip(client_lr: float = 0.05, server_lr: float = 1.0, max_norm: float = 1.0):
  """Clipped local SGD on the clients, FedBuff's server."""
  return afl_jax.Algorithm(
    'fedbuff_clip', clipped_sgd(client_lr, max_norm), afl_jax.servers.fedbuff(server_lr)
  )


# ---- (c) a flax model ------------------------------------------------------------------------
class TinyMLP(nn.Module):
  """The factory is called as ``TinyMLP(num_classes=C)``; inputs [B, ...] -> logits [B, C]."""

  num_classes: int = 10
  width: int = 32

  @nn.compact
  def __call__(self, x):
    x = x.reshape((x.shape[0], -1))
    return nn.Dense(self.num_classes)(nn.relu(nn.Dense(self.width)(x)))


# Its attributes other than num_classes are its settings (config.model_args.width).
afl_jax.models.MODELS.register('tiny_mlp', TinyMLP, width=checks.integer(1))


# ---- (d) a dataset from arrays ---------------------------------------------------------------
def blobs(*, data_dir=None, download=False, seed=0, spread=1.0) -> afl_jax.data.ArrayDataset:
  """Four Gaussian blobs in 8 dimensions, each of standard deviation ``spread``: 800
  training and 200 test points.

  The loader is called as ``loader(data_dir=..., download=..., seed=..., spread=...)``:
  ``spread`` is its own setting (``config.dataset_args.spread``); the data here does not
  depend on the others (the run's seed splits it over the clients).
  """
  rng = np.random.default_rng(1234)
  centers = 1.5 * rng.normal(size=(4, 8))
  y = rng.integers(0, 4, size=1000).astype(np.int32)
  x = (centers[y] + spread * rng.normal(size=(1000, 8))).astype(np.float32)
  return afl_jax.data.ArrayDataset(x[:800], y[:800], x[800:], y[800:], num_classes=4)


afl_jax.data.DATASETS.register('blobs', blobs, spread=checks.real(0.0, low_open=True))


# ---- (h) a compressor ------------------------------------------------------------------------
class ResidualState(NamedTuple):
  residual: Any  # what this client's earlier messages did not send (same tree as a message)


def residual_sign() -> afl_jax.compression.Compressor:
  """Sends mean(|v|) * sign(v) of v = message + residual, keeps v - sent as the residual;
  uploads one bit per coordinate and one 32-bit scale."""

  def init(updates):
    return ResidualState(jax.tree.map(jnp.zeros_like, updates))

  def compress(updates, state, key):
    del key  # deterministic
    v = jax.tree.map(jnp.add, updates, state.residual)
    flat, unravel = jax.flatten_util.ravel_pytree(v)
    sent = unravel(jnp.mean(jnp.abs(flat)) * jnp.sign(flat))
    bits = jnp.float32(flat.size + 32)  # static shapes: the same count every message
    return sent, ResidualState(jax.tree.map(jnp.subtract, v, sent)), bits

  return afl_jax.compression.Compressor(init, compress)


afl_jax.compression.COMPRESSORS.register('residual_sign', residual_sign)
