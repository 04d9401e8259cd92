"""Server rules by name: ``afl_jax.servers.<name>(...)`` or ``make(name, **settings)``, each living
with its algorithm (``afl_jax/algorithms/``); the optax transforms and weightings they share."""
# ruff: noqa: F401 (re-exports, listed in __all__)

from afl_jax.algorithms import SERVERS
from afl_jax.algorithms._baselines import staleness_function
from afl_jax.algorithms._fedecho import distill_optimizer
from afl_jax.algorithms._fedgm import (
  general_momentum,
  quasi_hyperbolic_momentum,
  stagewise_constant,
)
from afl_jax.algorithms._shared import aggregate, nova, nova_scales, optimizer_server

make, names, settings, register = SERVERS.verbs()
globals().update(SERVERS.exports())  # afl_jax.servers.<name>: each registered server rule
__all__ = (
  'SERVERS aggregate distill_optimizer general_momentum make names nova nova_scales '
  'optimizer_server quasi_hyperbolic_momentum register settings stagewise_constant '
  'staleness_function'
).split() + SERVERS.names()
