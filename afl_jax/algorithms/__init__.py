"""Algorithms by name, one private file per paper family holding its client rule, server rule and
registration: ``afl_jax.algorithms.<name>(**hparams)`` or ``make(name, facts=RunInfo(...),
**hparams)`` builds the registered :class:`~afl_jax.core.types.Algorithm`; ``names()`` lists
them, ``settings(name)`` gives a name's hyperparameters (docs/algorithms.md)."""

from afl_jax.algorithms._asynfl import asynfl, asynflc, asynflc_ef
from afl_jax.algorithms._base import ALGORITHMS, CLIENTS, CONTEXT_FIELDS, SERVERS, RunInfo
from afl_jax.algorithms._baselines import (
  fedasync,
  fedavg,
  fedbuff,
  fedbuff_nova,
  fedbuff_prox,
  fednova,
  fedprox,
)
from afl_jax.algorithms._ca2fl import ca2fl
from afl_jax.algorithms._fadas import fadas
from afl_jax.algorithms._fedac import fedac
from afl_jax.algorithms._fedecho import fedecho
from afl_jax.algorithms._fedfa import (
  fedfa_delta,
  fedfa_delta_nova,
  fedfa_delta_prox,
  fedfa_param,
  fedfa_param_nova,
  fedfa_param_prox,
)
from afl_jax.algorithms._fedgm import (
  autonomous_fedgm,
  autonomous_fedgm_single_stage,
  fedavgm,
  fedgm,
  fednag,
  fedopt,
  fedsgd,
  multistage_fedgm,
)
from afl_jax.algorithms._masfl import adamasfl, adamasfl_theory, masfl, masfl_theory
from afl_jax.algorithms._port import port

make, names, settings, register = ALGORITHMS.verbs()

__all__ = [
  'ALGORITHMS',
  'CLIENTS',
  'CONTEXT_FIELDS',
  'SERVERS',
  'RunInfo',
  'adamasfl',
  'adamasfl_theory',
  'asynfl',
  'asynflc',
  'asynflc_ef',
  'autonomous_fedgm',
  'autonomous_fedgm_single_stage',
  'ca2fl',
  'fadas',
  'fedac',
  'fedasync',
  'fedavg',
  'fedavgm',
  'fedbuff',
  'fedbuff_nova',
  'fedbuff_prox',
  'fedecho',
  'fedfa_delta',
  'fedfa_delta_nova',
  'fedfa_delta_prox',
  'fedfa_param',
  'fedfa_param_nova',
  'fedfa_param_prox',
  'fedgm',
  'fednag',
  'fednova',
  'fedopt',
  'fedprox',
  'fedsgd',
  'make',
  'masfl',
  'masfl_theory',
  'multistage_fedgm',
  'names',
  'port',
  'register',
  'settings',
]
