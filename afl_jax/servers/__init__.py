"""Server rules: ``afl_jax.servers.<name>(...)`` builds a :class:`~afl_jax.core.types.ServerRule`,
its arguments checked at the call (docs/algorithms/)."""

from afl_jax.servers._ca2fl import ca2fl
from afl_jax.servers._fadas import fadas
from afl_jax.servers._fedac import fedac
from afl_jax.servers._fedasync import fedasync, staleness_function
from afl_jax.servers._fedecho import distill_optimizer, fedecho
from afl_jax.servers._fedfa import fedfa
from afl_jax.servers._fedgm import (
  fedgm,
  fedopt,
  fedopt_optimizer,
  general_momentum,
  multistage_fedgm,
  quasi_hyperbolic_momentum,
  stagewise_constant,
)
from afl_jax.servers._fednova import nova, nova_scales
from afl_jax.servers._masfl import adamasfl, masfl
from afl_jax.servers._port import port
from afl_jax.servers._pseudo_gradient import aggregate, fedavg, fedbuff, optimizer_server

__all__ = [
  'adamasfl',
  'aggregate',
  'ca2fl',
  'distill_optimizer',
  'fadas',
  'fedac',
  'fedasync',
  'fedavg',
  'fedbuff',
  'fedecho',
  'fedfa',
  'fedgm',
  'fedopt',
  'fedopt_optimizer',
  'general_momentum',
  'masfl',
  'multistage_fedgm',
  'nova',
  'nova_scales',
  'optimizer_server',
  'port',
  'quasi_hyperbolic_momentum',
  'stagewise_constant',
  'staleness_function',
]
