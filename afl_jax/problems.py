"""Problems for :func:`afl_jax.simulate` (re-exported from :mod:`afl_jax.core.problem`)."""

from afl_jax.core.problem import Problem, from_loss

__all__ = ['Problem', 'from_loss']
