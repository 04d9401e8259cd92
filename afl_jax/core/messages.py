"""Broadcasts and messages that a family's client and server rules both read, declared below
both so that ``afl_jax.clients`` and ``afl_jax.servers`` never import each other."""

from __future__ import annotations

from typing import NamedTuple

import jax

from afl_jax.core.types import Params


class FedACBroadcast(NamedTuple):
  """What the FedAC server sends to a starting client."""

  params: Params  # x_t
  variate: Params  # c: the global control variate
  applied: jax.Array  # int32[N]: jobs of each client applied so far


class FedACMessage(NamedTuple):
  """What a FedAC client sends."""

  delta: Params  # Delta_i = x_start - x_K
  variate_change: Params  # c_i^+ - c_i


class MasFLBroadcast(NamedTuple):
  """What the MasFL server sends (Alg. 1 line 8 / Alg. 3 line 9)."""

  params: Params  # theta^t
  direction: Params  # d^t = beta c^t + (1 - beta) g^t


class MasFLMessage(NamedTuple):
  """What a MasFL client sends (Alg. 2 line 6 / Alg. 4 line 6)."""

  variate: Params  # c~_i^{t+1}: mean of the job's K stochastic gradients
  delta: Params | None  # AdaMasFL: (theta_start - theta_K) / (eta K); MasFL: None
