"""Client (local training) rules."""

from afl_jax.clients.sgd import local_sgd, run_local_steps

__all__ = ['local_sgd', 'run_local_steps']
