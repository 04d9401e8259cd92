"""Client (local training) rules."""

from afl_jax.clients.always_on import AlwaysOnState, always_on_sgd
from afl_jax.clients.fedac import fedac_client
from afl_jax.clients.masfl import adamasfl_client, masfl_client
from afl_jax.clients.normalized import divide_by_local_steps
from afl_jax.clients.prox import prox_sgd
from afl_jax.clients.sgd import local_sgd, run_local_steps
from afl_jax.core.precision import with_compute_dtype

__all__ = [
  'AlwaysOnState',
  'always_on_sgd',
  'divide_by_local_steps',
  'local_sgd',
  'prox_sgd',
  'run_local_steps',
]
__all__ += ['adamasfl_client', 'masfl_client']
__all__ += ['fedac_client']
__all__ += ['with_compute_dtype']
