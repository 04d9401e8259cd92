"""Server (aggregation) rules."""

from afl_jax.servers.fedasync import fedasync, staleness_function
from afl_jax.servers.pseudo_gradient import aggregate, fedavg, fedbuff, optimizer_server

__all__ = ['aggregate', 'fedasync', 'fedavg', 'fedbuff', 'optimizer_server',
           'staleness_function']
