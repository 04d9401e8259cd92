"""The errors a user can cause, one family: ``scripts/train.py`` prints a :class:`UserError`
as ``error: <message>`` (one line, no traceback) with a non-zero exit status."""

from __future__ import annotations


class UserError(ValueError):
  """An error caused by the user's input (config, files, sizes), not by a bug."""


class ConfigError(UserError):
  """An invalid experiment configuration: ``config.FIELD=VALUE is invalid: ...``; ``field``
  is the config path to change (None when no one field is to blame)."""

  def __init__(self, message: str, *, field: str | None = None):
    super().__init__(message)
    self.field = field

  @classmethod
  def invalid(cls, field: str, value: object, why: str) -> ConfigError:
    """``config.FIELD=VALUE is invalid: WHY`` carrying ``field``."""
    return cls(f'config.{field}={value!r} is invalid: {why}', field=field)


class ResumeError(UserError):
  """A workdir whose checkpoint belongs to a different run than the one requested."""


class ArgumentError(UserError):
  """An argument of the Python API (``afl_jax.simulate``, ``afl_jax.sweep``) that cannot
  work: the message names the argument, what it got and what to pass."""
