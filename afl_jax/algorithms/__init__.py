"""Algorithms by name: ``afl_jax.algorithms.<name>(**hparams)`` or ``get(name, run=RunInfo(...),
**hparams)`` builds the registered :class:`~afl_jax.core.types.Algorithm` (docs/algorithms.md)."""

from afl_jax.algorithms._asynfl import asynfl, asynflc, asynflc_ef
from afl_jax.algorithms._baselines import fedasync, fedavg, fedbuff
from afl_jax.algorithms._ca2fl_fadas import ca2fl, fadas
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
from afl_jax.algorithms._prox_nova import fedbuff_nova, fedbuff_prox, fednova, fedprox
from afl_jax.algorithms.registry import (
  ALGORITHMS,
  RunInfo,
  context,
  get,
  hyperparameter_specs,
  hyperparameters,
  names,
  parameters,
  register,
)

__all__ = ['ALGORITHMS', 'RunInfo', 'context', 'get', 'hyperparameter_specs']
__all__ += ['hyperparameters', 'names', 'parameters', 'register', 'adamasfl_theory']
__all__ += ['masfl_theory', 'asynfl', 'asynflc', 'asynflc_ef', 'fedasync', 'fedavg', 'fedbuff']
__all__ += ['ca2fl', 'fadas', 'fedac', 'fedecho', 'fedfa_delta', 'fedfa_delta_nova']
__all__ += ['fedfa_delta_prox', 'fedfa_param', 'fedfa_param_nova', 'fedfa_param_prox']
__all__ += [
  'autonomous_fedgm',
  'autonomous_fedgm_single_stage',
  'fedavgm',
  'fedgm',
  'fednag',
  'fedopt',
  'fedsgd',
]
__all__ += ['multistage_fedgm', 'adamasfl', 'masfl', 'port', 'fedbuff_nova', 'fedbuff_prox']
__all__ += ['fednova', 'fedprox']
