"""Client rules by name: ``afl_jax.clients.<name>(...)`` or ``make(name, **settings)``, each living
with its algorithm (``afl_jax/algorithms/``); :func:`run_local_steps` is their masked loop."""
# ruff: noqa: F401 (re-exports, listed in __all__)

from afl_jax.algorithms import CLIENTS
from afl_jax.algorithms._asynfl import AlwaysOnState
from afl_jax.algorithms._shared import divide_by_local_steps, run_local_steps
from afl_jax.core.precision import with_compute_dtype

make, names, settings, register = CLIENTS.verbs()
globals().update(CLIENTS.exports())  # afl_jax.clients.<name>: each registered client rule
__all__ = (
  'CLIENTS AlwaysOnState divide_by_local_steps make names register run_local_steps settings '
  'with_compute_dtype'
).split() + CLIENTS.names()
