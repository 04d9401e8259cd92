"""Hyperparameters and a RunInfo that make every registered algorithm run on a tiny problem."""

import jax.numpy as jnp
import numpy as np

import afl_jax
from afl_jax.algorithms import RunInfo

UNLABELED = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)


def two_class_logits(params, x):
  z = x @ params['x']
  return jnp.stack([z, -z], axis=-1)


EXTRA = {
  'asynflc': dict(fraction=0.5),
  'asynflc_ef': dict(fraction=0.5),
  'masfl': dict(client_lr=0.05, server_lr=1.0, beta=0.5),
  'adamasfl': dict(client_lr=0.05, server_lr=0.1, beta=0.5),
  'fedecho': dict(distill_steps=2, distill_lr=0.01),
  'fadas': dict(server_lr=0.05),
}
COMMON = dict(client_lr=0.05, window_size=2)  # FedFa: a window of 2


def run_info(num_clients, num_rounds=4, unlabeled_x=UNLABELED):  # S = K = 2
  return RunInfo(num_clients, 2, 2, num_rounds, two_class_logits, unlabeled_x)


def build(name, run):
  """Algorithm ``name`` with its run context from ``run`` and small-problem hyperparameters."""
  hp = {**COMMON, **EXTRA.get(name, {})}
  hp = {k: v for k, v in hp.items() if k in afl_jax.algorithms.settings(name)}
  return afl_jax.algorithms.make(name, facts=run, **hp)
