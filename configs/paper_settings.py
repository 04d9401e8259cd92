"""The papers' experiment settings on Fashion-MNIST, scaled to 2 CPU cores.

Each function returns the shared part of one paper's setting (data, model, delay
model, run length); the config files beside this one start from one of these and set only
the algorithm and its hyperparameters (and what differs for that algorithm). The
scaling choices are explained in the docstrings of the config files and on the
results pages (``docs/results/``).
"""

from __future__ import annotations

import ml_collections

from afl_jax.pipeline import config as config_lib


def masfl_fmnist() -> ml_collections.ConfigDict:
  """MasFL paper (000) Sec. 6: N=100, Dir(0.5), FedBuff clock Mc=20, M=10, U(0, 20).

  Scaled: logistic regression, 12,000 training samples, K=5 steps of batch 50 (about
  two local epochs of a median client), 300 server steps.
  """
  c = config_lib.default()
  c.train_subset = 12000
  c.model = 'logreg'
  c.batch_size = 50
  c.local_steps = 5
  c.num_rounds = 300
  c.eval_every = 25
  c.eval_train_samples = 1000
  return c


def fedgm_fmnist() -> ml_collections.ConfigDict:
  """FedGM paper (003) Table 1: 100 clients, 5 per step, Dir(0.5), 3 local epochs.

  Scaled: MLP, 10,000 training samples; schedules are set per config (synchronous
  rounds or App. H.1's random staleness).
  """
  c = config_lib.default()
  c.train_subset = 10000
  c.schedule.clients_per_step = 5
  c.eval_train_samples = 2000
  return c


def fedgm_synchronous_fmnist() -> ml_collections.ConfigDict:
  """``fedgm_fmnist()`` in Table 1's synchronous rounds: 3 local epochs, every job of the
  same length (the FedGM family's synchronous configs and their baselines)."""
  c = fedgm_fmnist()
  c.local_epochs = 3
  c.schedule.kind = 'synchronous'
  c.schedule.durations = 'constant'
  c.schedule.durations_params = 'value=1'
  return c


def fedfa_fmnist() -> ml_collections.ConfigDict:
  """FedFa paper (001): long-tailed (log-normal) job durations, target accuracy 0.75.

  Scaled: MLP, 15,000 training samples.
  """
  c = config_lib.default()
  c.train_subset = 15000
  c.schedule.durations = 'lognormal'
  c.schedule.durations_params = 'mu=1.0,sigma=1.0'
  c.target_accuracy = 0.75
  c.eval_train_samples = 1000
  return c


def fedfa_async_fmnist() -> ml_collections.ConfigDict:
  """``fedfa_fmnist()`` fully asynchronous (one server step per arrival, the FedFa family's
  configs): Mc = 10 clients training at once, 1,000 arrivals, evaluation every 50."""
  c = fedfa_fmnist()
  c.schedule.kind = 'fully_async'
  c.schedule.concurrency = 10
  c.num_rounds = 1000
  c.eval_every = 50
  return c


def asynfl_fmnist() -> ml_collections.ConfigDict:
  """AsynFL paper (004) Sec. V: Dir(0.4), Normal job times, a fixed waiting window.

  Scaled: 20 clients, 12,000 training samples, K=5, 100 rounds; the server waits 5 s
  for jobs of Normal(10, 3) s.
  """
  c = config_lib.default()
  c.num_clients = 20
  c.dirichlet_alpha = 0.4
  c.train_subset = 12000
  c.local_steps = 5
  c.schedule.kind = 'waiting_windows'
  c.schedule.wait_seconds = 5.0
  c.schedule.durations = 'normal'
  c.schedule.durations_params = 'mean=10,std=3'
  c.num_rounds = 100
  c.eval_every = 5
  c.eval_train_samples = 1000
  c.target_accuracy = 0.75
  return c


def fedecho_fmnist() -> ml_collections.ConfigDict:
  """FedEcho paper (002) Sec. 5.1 / Table 2: N=50, Dir(0.1), FedBuff clock Mc=25, M=5,
  Table 1's large-delay job times.

  Scaled: MLP, an 11,000-sample training subset of which 1,000 are held out as the
  unlabeled set (``unlabeled_source = 'digits'``: an external set instead), K=5 steps
  of batch 32, 150 server steps (configs/fedecho_fmnist.py gives the reasons).
  Baselines of FedEcho's Table 2 start from the same setting.
  """
  c = config_lib.default()
  c.num_clients = 50
  c.partition = 'dirichlet'
  c.dirichlet_alpha = 0.1
  c.train_subset = 11000
  c.unlabeled_size = 1000
  c.model = 'mlp'
  c.batch_size = 32
  c.local_steps = 5
  c.schedule.kind = 'fedecho_large'
  c.schedule.concurrency = 25
  c.schedule.buffer_size = 5
  c.num_rounds = 150
  c.eval_every = 10
  c.eval_train_samples = 1000
  return c
