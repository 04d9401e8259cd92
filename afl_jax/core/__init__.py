"""Types, tree helpers, the problem container and the scan/vmap engine."""

from afl_jax.core.engine import SimState, StepInputs, step_inputs
from afl_jax.core.problem import Problem, from_loss
from afl_jax.core.simulator import Simulator
from afl_jax.core.types import Algorithm, Arrivals, ClientRule, EmptyState, LocalTask, ServerRule

# fmt: off
__all__ = [
  'Algorithm', 'Arrivals', 'ClientRule', 'EmptyState', 'LocalTask', 'Problem', 'ServerRule',
  'SimState', 'Simulator', 'StepInputs', 'from_loss', 'step_inputs',
]
# fmt: on
