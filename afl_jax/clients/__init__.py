"""Client rules: ``afl_jax.clients.<name>(...)`` builds a :class:`~afl_jax.core.types.ClientRule`;
:func:`run_local_steps` is the masked loop they build on."""

from afl_jax.clients._always_on import AlwaysOnState, always_on_sgd
from afl_jax.clients._fedac import fedac
from afl_jax.clients._masfl import adamasfl, masfl
from afl_jax.clients._normalized import divide_by_local_steps
from afl_jax.clients._prox import prox_sgd
from afl_jax.clients._sgd import local_sgd, run_local_steps
from afl_jax.core.precision import with_compute_dtype

__all__ = [
  'AlwaysOnState',
  'adamasfl',
  'always_on_sgd',
  'divide_by_local_steps',
  'fedac',
  'local_sgd',
  'masfl',
  'prox_sgd',
  'run_local_steps',
  'with_compute_dtype',
]
