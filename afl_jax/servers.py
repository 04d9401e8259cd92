"""Server rules by name: ``afl_jax.servers.<name>(...)`` or ``make(name, **settings)`` builds a
:class:`~afl_jax.core.types.ServerRule`, its arguments checked at the call; ``names()`` lists
them, ``settings(name)`` gives a rule's settings. Each lives with its algorithm
(``afl_jax/algorithms/``, docs/algorithms/); the optax transforms and weightings they share
are re-exported here."""

from afl_jax.algorithms._asynfl import asynfl_server as asynfl
from afl_jax.algorithms._base import SERVERS
from afl_jax.algorithms._baselines import fedasync_server as fedasync
from afl_jax.algorithms._baselines import staleness_function
from afl_jax.algorithms._ca2fl import ca2fl_server as ca2fl
from afl_jax.algorithms._fadas import fadas_server as fadas
from afl_jax.algorithms._fedac import fedac_server as fedac
from afl_jax.algorithms._fedecho import distill_optimizer
from afl_jax.algorithms._fedecho import fedecho_server as fedecho
from afl_jax.algorithms._fedfa import fedfa_server as fedfa
from afl_jax.algorithms._fedgm import fedgm_server as fedgm
from afl_jax.algorithms._fedgm import fedopt_server as fedopt
from afl_jax.algorithms._fedgm import (
  general_momentum,
  quasi_hyperbolic_momentum,
  stagewise_constant,
)
from afl_jax.algorithms._fedgm import multistage_fedgm_server as multistage_fedgm
from afl_jax.algorithms._masfl import adamasfl_server as adamasfl
from afl_jax.algorithms._masfl import masfl_server as masfl
from afl_jax.algorithms._port import port_server as port
from afl_jax.algorithms._shared import (
  aggregate,
  fedavg,
  fedbuff,
  nova,
  nova_scales,
  optimizer_server,
)

make, names, settings, register = SERVERS.verbs()

__all__ = [
  'SERVERS',
  'adamasfl',
  'aggregate',
  'asynfl',
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
  'general_momentum',
  'make',
  'masfl',
  'multistage_fedgm',
  'names',
  'nova',
  'nova_scales',
  'optimizer_server',
  'port',
  'quasi_hyperbolic_momentum',
  'register',
  'settings',
  'stagewise_constant',
  'staleness_function',
]
