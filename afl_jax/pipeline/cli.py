"""The scripts' command line: ``--config.FIELD`` overrides (any hyperparameter or component
setting) and one-line errors."""

from __future__ import annotations

import ast
import dataclasses
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import ml_collections
from absl import app, flags
from ml_collections import config_flags
from ml_collections.config_flags import config_path

from afl_jax import algorithms, schedules
from afl_jax.errors import ConfigError, UserError
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline.workdir import flag_value

_HPARAM = re.compile(
  r'^--config\.(hparams\.|model_args\.|dataset_args\.|schedule\.durations_params\.)'
  r'([A-Za-z_]\w*)=(.*)$',
  re.S,
)
_OVERRIDE = re.compile(r'^--config\.([\w.]+)(?:=(.*))?$', re.S)
# absl's word for a bad value: ``flag --NAME=VALUE: WHY`` (a flag's parser or validator) or
# ``flags A=1, B=2: --A=... WHY`` (a validator of several flags, its message naming the flag).
_ONE_FLAG = re.compile(r'flag --([\w.]+)=(.*?): (.*)$', re.S)
_SEVERAL_FLAGS = re.compile(r'flags .*?: (--.*)$')

_HELP = ('--help', '-help', '-h', '-?', '--helpshort', '--helpfull', '--helpxml')
DEFAULT_CONFIG = 'configs/default.py'


@dataclasses.dataclass
class ConfigFlag:
  """A script's ``--config`` flag, its default file and the overrides of open sections."""

  holder: Any
  default: str
  overrides: list[tuple[str, str]]

  def finish(self) -> ml_collections.ConfigDict:
    return finish_config(self.holder.value, self.overrides)


def exit_error(error: Exception | str) -> NoReturn:
  """Print ``error: <message>`` (one line) and exit with status 1."""
  text = ' '.join(str(error).split())
  sys.exit(f'error: {text}')


def repo_path(path: str) -> str:
  """``path`` as given when it exists from here (or is absolute), else under the checkout
  (``$AFL_JAX_CHECKOUT``, :func:`afl_jax.pipeline.cache.use_checkout`)."""
  root = os.environ.get('AFL_JAX_CHECKOUT')
  if not root or os.path.isabs(path) or os.path.exists(path.split(':')[0]):
    return path
  beside = os.path.join(root, path)
  return beside if os.path.exists(beside.split(':')[0]) else path


def check_config_file(spec: str) -> str | None:
  """One line saying why the config file ``spec`` (``FILE[:ARG]``) cannot be used; None: fine."""
  file, _, arg = spec.partition(':')
  where = f'--config={spec!r} is invalid'
  if not file:
    return f'{where}: give a config file, e.g. --config=configs/digits_smoke.py'
  if not os.path.isfile(file):
    what = 'is a directory' if os.path.isdir(file) else 'no such file'
    return f'{where}: {what} (from {os.getcwd()}); give the path of a config file'
  try:
    module = config_lib.exec_file(file)
  except SyntaxError as e:
    return f'{where}: syntax error at {e.filename or file}:{e.lineno}: {e.msg}'
  except Exception as e:  # noqa: BLE001 (any failure of the user's file, named by its line)
    return f'{where}: {raised_at(e, file)}'
  get_config = getattr(module, 'get_config', None)
  if not callable(get_config):
    return f'{where}: {file} defines no get_config() function'
  try:
    config = get_config(arg) if arg else get_config()
  except UserError as e:  # the file's own one-line message (e.g. an unknown entry name)
    return f'{where}: {e}'
  except Exception as e:  # noqa: BLE001
    return f'{where}: get_config() raised at {raised_at(e, file)}'
  if not isinstance(config, ml_collections.ConfigDict):
    return (
      f'{where}: get_config() returned a {type(config).__name__}, not an '
      'ml_collections.ConfigDict (start from afl_jax.pipeline.config.default())'
    )
  return None


def raised_at(error: BaseException, file: str) -> str:
  """``FILE:LINE: Type: message`` at the deepest frame in ``file`` (else the deepest)."""
  frames = traceback.extract_tb(error.__traceback__)
  mine = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(file)]
  frame = (mine or frames or [None])[-1]
  text = ' '.join(str(error).split()) or type(error).__name__
  at = f'{frame.filename}:{frame.lineno}: ' if frame is not None else f'{file}: '
  return f'{at}{type(error).__name__}: {text}'


def _unknown_field(argv: Sequence[str], default: str) -> str | None:
  try:
    config = config_lib.load_file(flag_value(argv, 'config') or default)
  except Exception:  # noqa: BLE001 (only used to word an error that already happened)
    return None
  return unknown_field_message(config, argv)


def unknown_field_message(config: ml_collections.ConfigDict, argv: Sequence[str]) -> str | None:
  """The one line for the first ``--config.PATH`` naming no field of ``config``."""
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


# Python's message of a command-line value the field's type does not take, in parse_value's words.
_PYTHON_WORDS = (
  ('invalid literal for int()', 'must be an integer.'),
  ('could not convert string to float', 'must be a number.'),
  ("('Non-boolean argument to boolean flag'", 'must be a boolean (true/false).'),
)


def _bad_values(error: Exception) -> str | None:
  """absl's message of flags with bad values as ``--NAME=VALUE is invalid: WHY`` (None: other)."""
  lines = []
  for line in str(error).splitlines():
    one, several = _ONE_FLAG.match(line), _SEVERAL_FLAGS.match(line)
    if not (one or several):
      return None
    if several:
      lines.append(several[1])
    elif one[1].startswith('config.'):  # a config field, as ConfigError words it
      why = one[3]
      if why.startswith('Failed to parse') and 'as a ConfigDict' in why:
        why = "must be a mapping, written '{name: value, ...}'."
      for python, words in _PYTHON_WORDS:  # Python's words for a failed cast, as parse_value's
        if why.startswith(python):
          why = words
      lines.append(f'{one[1]}={one[2]!r} is invalid: {why}')
    else:
      lines.append(f'--{one[1]}={one[2]} is invalid: {one[3]}')
  return '; '.join(lines) or None


def _split(argv: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
  hparams, rest = [], []
  for arg in argv:
    m = _HPARAM.match(arg)
    if m:
      section = '' if m[1] == 'hparams.' else m[1]
      hparams.append((section + m[2], m[3]))
    else:
      rest.append(arg)
  return hparams, rest


def define_config_flag(default: str = DEFAULT_CONFIG) -> ConfigFlag:
  """``--config``; overrides of open sections are kept out of ml_collections (the file may not
  name them) and applied by :meth:`ConfigFlag.finish` (give the flag to :func:`run`)."""
  hparams, rest = _split(sys.argv)
  default = repo_path(default)
  given = flag_value(rest, 'config')
  bad = check_config_file(default) if given is None else None  # a given file: in parse
  if bad:
    exit_error(bad.replace('--config=', 'the default --config=', 1))
  try:
    holder = config_flags.DEFINE_config_file('config', default, 'Experiment config.', sys_argv=rest)
  except Exception as e:  # noqa: BLE001 (an override of the default config, applied here)
    exit_error(_unknown_field(rest, default) or e)
  return ConfigFlag(holder, default, hparams)


def flags_parser(
  *, positional: str = '', config: ConfigFlag | None = None
) -> Callable[[list[str]], list[str]]:
  """An absl ``flags_parser`` turning flag errors into one line; ``positional`` ('': none
  taken) names the positional arguments; ``config`` keeps the overrides parsed."""
  default = config.default if config is not None else DEFAULT_CONFIG

  def parse(argv: list[str]) -> list[str]:
    hparams, rest = _split(argv)
    given = flag_value(rest, 'config')
    bad = given is not None and check_config_file(given)
    if bad:
      exit_error(bad)
    try:
      remaining = flags.FLAGS(rest)
    except SystemExit as e:  # absl prints --help and exits 1; asking for help succeeds
      asked = any(a.split('=')[0] in _HELP for a in rest[1:])
      raise SystemExit(0 if asked and e.code == 1 else e.code) from None
    except flags.Error as e:
      missing = re.match(r'Missing value for flag (--[\w.]+)', str(e))
      if missing:
        exit_error(f'{missing.group(1)} needs a value: {missing.group(1)}=VALUE')
      unknown = re.match(r"Unknown command line flag '([^']+)'", str(e))
      exit_error(
        _unknown_field(rest, default)
        or _bad_values(e)
        or (unknown and f'--{unknown.group(1)} is not a flag of this script (see --helpshort)')
        or e
      )
    except (AttributeError, KeyError, TypeError, ValueError, OSError) as e:
      exit_error(_unknown_field(rest, default) or e)
    if not positional and len(remaining) > 1:
      exit_error(
        f'unexpected argument {remaining[1]!r}: this script takes flags only (--name=value; '
        'see --helpshort)'
      )
    if config is not None:
      config.overrides[:] = hparams
    return remaining

  return parse


def run(
  main: Callable[[list[str]], Any], *, positional: str = '', config: ConfigFlag | None = None
) -> None:
  """``app.run(main)``: a bad flag or a :class:`UserError` is one ``error:`` line (exit 1);
  JAX's INFO lines stay out unless ``--verbosity`` is given."""

  def guarded(argv: list[str]) -> Any:
    asked = {a.split('=')[0].lstrip('-') for a in sys.argv[1:]} & {'verbosity', 'v'}
    if not asked:
      logging.getLogger('jax').setLevel(logging.WARNING)
    try:
      return main(argv)
    except UserError as e:
      exit_error(e)

  try:
    app.run(guarded, flags_parser=flags_parser(positional=positional, config=config))
  except KeyboardInterrupt as e:  # Ctrl-C: one line, exit status 130 (128 + SIGINT)
    text = ' '.join(str(e).split()) or (
      'interrupted (Ctrl-C); the metrics so far are kept, and the same command continues '
      'from the last checkpoint'
    )
    print(text if text.startswith('interrupted') else f'interrupted: {text}', file=sys.stderr)
    sys.exit(130)


def finish_config(
  config: ml_collections.ConfigDict, overrides: Sequence[tuple[str, str]] = ()
) -> ml_collections.ConfigDict:
  """The resolved config with the ``(NAME, VALUE)`` ``overrides`` of open sections applied
  (ConfigError: a field of the default missing, an unknown component or setting, or a value a
  single run does not read)."""
  missing = [field for field in config_lib.default() if field not in config]
  if missing:  # a config file not built on the default: one line, not a traceback
    why = "the config file's get_config() must start from afl_jax.pipeline.config.default()"
    raise ConfigError(f'config.{missing[0]} is missing: {why}', field=missing[0])
  if not config.get('sweep'):  # a sweep's axes: sweep.grid
    config_lib.refuse_unread(config)
  out = config_lib.resolve(config)
  if any('.' not in name for name, _ in overrides):
    algorithms.ALGORITHMS.bind(out.algorithm, {})
  for name, text in overrides:
    section, _, arg = name.rpartition('.')
    override_setting(out, section or 'hparams', arg, text)
  return out


def parse_value(text: str, current: Any) -> Any:
  """A command-line string as the type of ``current`` (its default); None: best guess."""
  low = text.strip().lower()
  if isinstance(current, bool) or (current is None and low in ('true', 'false')):
    if low not in ('true', 'false', '1', '0'):
      raise ValueError(f'must be a boolean (true/false); got {text!r}')
    return low in ('true', '1')
  for cast, what in ((int, 'an integer'), (float, 'a number')):
    if isinstance(current, cast):
      try:
        return cast(text)
      except ValueError:
        raise ValueError(f'must be {what}; got {text!r}') from None
  if isinstance(current, tuple | list):
    try:
      value = ast.literal_eval(text if text.strip().startswith(('(', '[')) else f'({text},)')
    except (ValueError, SyntaxError):
      raise ValueError(f'must be a tuple of values like (1, 2); got {text!r}') from None
    return tuple(value) if isinstance(value, tuple | list) else (value,)
  if current is None:
    for cast in (int, float):
      try:
        return cast(text)
      except ValueError:
        pass
    return None if low == 'none' else text
  return text


def override_setting(c: ml_collections.ConfigDict, section: str, name: str, text: str) -> None:
  """Apply ``--config.SECTION.NAME=TEXT`` to a resolved config (SECTION: an open section)."""
  if section == 'hparams':
    registry, component = algorithms.ALGORITHMS, c.algorithm
  elif section == 'schedule.durations_params':
    registry, component = schedules.DISTRIBUTIONS, c.schedule.durations
  else:
    field = {r.section: f for f, r in config_lib.NAMED.items()}[section]
    registry, component = config_lib.NAMED[field], c[field]
  if component not in registry:
    registry.bind(component, {})  # the unknown name, in one line
  valid = sorted(registry.settings(component))
  if name not in valid:
    why = f'{registry.kind} {component!r} takes no setting {name!r}; valid: {valid}'
    if section == 'hparams':
      why = f'{component} takes no hyperparameter {name!r}; valid: {valid}'
    raise config_lib._err(f'{section}.{name}', text, why)
  target = config_path.get_value(section, c)
  try:
    value = parse_value(text, target.get(name))
  except ValueError as e:
    raise config_lib._err(f'{section}.{name}', text, str(e)) from None
  with target.unlocked():
    target[name] = value
