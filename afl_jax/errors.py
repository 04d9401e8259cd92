"""The errors a user can cause: scripts print a :class:`UserError` as one line, no traceback."""

from __future__ import annotations


class UserError(ValueError):
  """An error caused by the user's input (config, files, sizes), not by a bug."""


class ConfigError(UserError):
  """An invalid configuration; ``field``: the config path to change (None: no one field)."""

  def __init__(self, message: str, *, field: str | None = None):
    super().__init__(message)
    self.field = field

  @classmethod
  def invalid(cls, field: str, value: object, why: str) -> ConfigError:
    return cls(f'config.{field}={value!r} is invalid: {why}', field=field)


class ResumeError(UserError):
  """A workdir whose checkpoint belongs to another run."""


class ArgumentError(UserError):
  """An argument of the Python API that cannot work (named, with what it got and what to pass)."""
