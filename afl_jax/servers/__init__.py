"""Server (aggregation) rules."""

from afl_jax.servers.fedac import fedac_server
from afl_jax.servers.fedasync import fedasync_server, staleness_function
from afl_jax.servers.fedecho import fedecho_server
from afl_jax.servers.fedfa import fedfa_server
from afl_jax.servers.fedgm import (
  fedgm_server,
  fedopt,
  general_momentum,
  multistage_fedgm,
  quasi_hyperbolic_momentum,
  server_optimizer,
  stagewise_constant,
)
from afl_jax.servers.fednova import nova, nova_scales
from afl_jax.servers.masfl import adamasfl_server, masfl_server
from afl_jax.servers.port import port_server
from afl_jax.servers.pseudo_gradient import aggregate, fedavg, fedbuff, optimizer_server

__all__ = [
  'aggregate',
  'fedasync_server',
  'fedavg',
  'fedbuff',
  'fedecho_server',
  'fedfa_server',
  'nova',
  'nova_scales',
  'optimizer_server',
  'staleness_function',
]
__all__ += [
  'fedgm_server',
  'fedopt',
  'general_momentum',
  'multistage_fedgm',
  'quasi_hyperbolic_momentum',
  'server_optimizer',
  'stagewise_constant',
]
__all__ += ['adamasfl_server', 'masfl_server']
__all__ += ['fedac_server', 'port_server']
