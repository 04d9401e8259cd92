"""The errors a user can cause, one family: every one ends a script as one line.

``scripts/train.py`` catches :class:`UserError` and prints ``error: <message>``
with a non-zero exit status (no traceback). Each module raises its own subclass
(``ScheduleError`` in afl_jax/schedules/schedule.py, ``DataError`` in
afl_jax/data/base.py, ``InsufficientMemoryError`` in afl_jax/core/memory.py) so
the message can blame the right field. The Python API raises the same family:
``ConfigError`` for a hyperparameter outside its declared range
(``afl_jax.algorithms.get``, ``afl_jax.sweep``) and :class:`ArgumentError` for
params, keys or an algorithm argument that cannot work.
"""


class UserError(ValueError):
  """An error caused by the user's input (config, files, sizes), not by a bug."""


class ConfigError(UserError):
  """An invalid experiment configuration: ``config.FIELD=VALUE is invalid: ...``."""


class ResumeError(UserError):
  """A workdir whose checkpoint belongs to a different run than the one requested."""


class ArgumentError(UserError):
  """An argument of the Python API (``afl_jax.simulate``, ``afl_jax.sweep``) that cannot
  work: the message names the argument, what it got and what to pass."""
