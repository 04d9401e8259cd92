"""Command-line handling for scripts/train.py: config overrides as one-line errors.

``--config.hparams.NAME=VALUE`` is applied after the config file is loaded and its
``hparams`` filled with every hyperparameter of the algorithm
(:func:`afl_jax.pipeline.config.resolve`), so any hyperparameter the algorithm
takes can be set even when the config file does not name it, and a name the
algorithm does not take is reported with the valid ones. Any other unknown or
mistyped ``--config.FIELD`` ends as one line too (absl would print a traceback).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import ml_collections
from absl import flags
from ml_collections import config_flags

from afl_jax.pipeline import config as config_lib

_HPARAM = re.compile(r'^--config\.hparams\.([A-Za-z_]\w*)=(.*)$', re.S)
_OVERRIDE = re.compile(r'^--config\.([\w.]+)(?:=(.*))?$', re.S)
_FLAG_VALUE = re.compile(r'flag --(config\.[\w.]+)=(.*?): (.*)$', re.S)

# --config.hparams.NAME=VALUE pairs taken out of argv by the parser, applied by
# finish_config once the config (and so the algorithm) is known.
_pending: list[tuple[str, str]] = []
_holder: list[Any] = []  # the --config flag defined by define_config_flag


def exit_error(error: Exception | str) -> NoReturn:
  """Print ``error: <message>`` (one line) and exit with status 1."""
  text = ' '.join(str(error).split())
  sys.exit(f'error: {text}')


def _load_config_file(argv: Sequence[str]) -> ml_collections.ConfigDict | None:
  path = 'configs/default.py'
  for arg in argv:
    if arg.startswith('--config='):
      path = arg.split('=', 1)[1]
  spec = importlib.util.spec_from_file_location('afl_jax_cli_config', path.split(':')[0])
  if spec is None or spec.loader is None:
    return None
  try:
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()
  except Exception:  # noqa: BLE001 (only used to word an error that already happened)
    return None


def unknown_field_message(config: ml_collections.ConfigDict, argv: Sequence[str]) -> str | None:
  """The one-line error for the first ``--config.PATH`` that names no field of ``config``."""
  for arg in argv:
    m = _OVERRIDE.match(arg)
    if not m:
      continue
    path, value = m.group(1), m.group(2)
    node: Any = config
    walked = []
    for part in path.split('.'):
      if not isinstance(node, ml_collections.ConfigDict) or part not in node:
        where = 'config' + ''.join(f'.{p}' for p in walked)
        have = sorted(node.keys()) if isinstance(node, ml_collections.ConfigDict) else []
        return f'config.{path}={value!r} is invalid: {where} has no field {part!r}; valid: {have}.'
      node = node[part]
      walked.append(part)
  return None


def _split(argv: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
  hparams, rest = [], []
  for arg in argv:
    m = _HPARAM.match(arg)
    (hparams.append((m.group(1), m.group(2))) if m else rest.append(arg))
  return hparams, rest


def define_config_flag(default: str = 'configs/default.py') -> flags.FlagHolder:
  """``--config`` (a config file) whose ``--config.hparams.*`` overrides this module applies.

  ml_collections reads overrides from ``sys.argv`` when the flag is defined; the
  hyperparameter overrides are kept out of it (the file may not name them) and
  applied by :func:`finish_config`.
  """
  hparams, rest = _split(sys.argv)
  _pending[:] = hparams
  holder = config_flags.DEFINE_config_file('config', default, 'Experiment config.', sys_argv=rest)
  _holder[:] = [holder]
  return holder


def _config_file_error(argv: Sequence[str]) -> str | None:
  """One line when the --config file could not be loaded (ml_collections defers that error)."""
  if not _holder:
    return None
  try:
    _holder[0].value.keys()
  except Exception as e:  # noqa: BLE001 (any failure of the user's config file)
    path = next((a.split('=', 1)[1] for a in argv if a.startswith('--config=')), None)
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f'--config={path!r} is invalid: cannot load it: {lines[-1] if lines else e}'
  return None


def flags_parser() -> Callable[[list[str]], list[str]]:
  """An absl ``flags_parser`` for ``app.run`` that turns flag errors into one line."""

  def parse(argv: list[str]) -> list[str]:
    hparams, rest = _split(argv)
    try:
      remaining = flags.FLAGS(rest)
    except flags.Error as e:
      m = _FLAG_VALUE.search(str(e))
      missing = re.match(r'Missing value for flag (--[\w.]+)', str(e))
      if missing:
        exit_error(f'{missing.group(1)} needs a value: {missing.group(1)}=VALUE')
      if m:
        exit_error(f'{m.group(1)}={m.group(2)!r} is invalid: {m.group(3)}')
      config = _load_config_file(rest)
      exit_error((config is not None and unknown_field_message(config, rest)) or e)
    except (AttributeError, KeyError, TypeError, ValueError, OSError) as e:
      config = _load_config_file(rest)
      exit_error((config is not None and unknown_field_message(config, rest)) or e)
    bad_file = _config_file_error(rest)
    if bad_file:
      exit_error(bad_file)
    _pending[:] = hparams
    return remaining

  return parse


def finish_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """The resolved config with the command line's ``--config.hparams.*`` applied.

  Raises:
    ConfigError: an unknown algorithm, or a hyperparameter it does not take.
  """
  out = config_lib.resolve(config)
  if _pending:
    config_lib.validate_algorithm_name(out)
  for name, text in _pending:
    config_lib.override_hparam(out, name, text)
  return out


__all__ = [
  'define_config_flag',
  'exit_error',
  'finish_config',
  'flags_parser',
  'unknown_field_message',
]
