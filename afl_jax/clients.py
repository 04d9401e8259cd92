"""Client rules by name: ``afl_jax.clients.<name>(...)`` or ``make(name, **settings)`` builds a
:class:`~afl_jax.core.types.ClientRule`, its arguments checked at the call; ``names()`` lists
them, ``settings(name)`` gives a rule's settings. Each lives with its algorithm
(``afl_jax/algorithms/``); :func:`run_local_steps` is the masked loop they build on."""

from afl_jax.algorithms._asynfl import AlwaysOnState, always_on_sgd
from afl_jax.algorithms._base import CLIENTS
from afl_jax.algorithms._fedac import fedac_client as fedac
from afl_jax.algorithms._masfl import adamasfl_client as adamasfl
from afl_jax.algorithms._masfl import masfl_client as masfl
from afl_jax.algorithms._shared import divide_by_local_steps, local_sgd, prox_sgd, run_local_steps
from afl_jax.core.precision import with_compute_dtype

make, names, settings, register = CLIENTS.verbs()

__all__ = [
  'CLIENTS',
  'AlwaysOnState',
  'adamasfl',
  'always_on_sgd',
  'divide_by_local_steps',
  'fedac',
  'local_sgd',
  'make',
  'masfl',
  'names',
  'prox_sgd',
  'register',
  'run_local_steps',
  'settings',
  'with_compute_dtype',
]
