"""The researcher's own modules a run's components reach (through what they hold and import),
each digested as its parsed tree, and the plain values they hold; docs/reliability.md, "One
identity"."""

from __future__ import annotations

import ast
import enum
import functools
import hashlib
import importlib.machinery
import inspect
import linecache
import os
import site
import sys
import sysconfig
import types
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from afl_jax.errors import UserError

_LIBRARY = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_HIDDEN = ('_afl_jax_beside_', 'afl_jax_config_file', '__main__')  # modules loaded by path
_CALLS = ('import_module', '__import__', 'import_beside')  # imports written as calls
_PARSED: dict[str, tuple[tuple, str, list]] = {}  # path -> (stat key, digest, imports)
_DEPTH = 20  # how deep a held value is read
HELD = 'held/'  # the key of the plain values a component holds: ``held/<what>``


class SourceError(UserError):
  """A component whose source cannot be read: its numbers could change unseen."""


@functools.cache
def _installed() -> tuple[str, ...]:
  paths = sysconfig.get_paths()
  roots = [paths[k] for k in ('stdlib', 'platstdlib', 'purelib', 'platlib') if paths.get(k)]
  roots += [*site.getsitepackages(), site.getusersitepackages(), os.path.dirname(os.__file__)]
  return tuple(sorted({os.path.realpath(r) + os.sep for r in roots}))


def is_own(path: str) -> bool:
  real = os.path.realpath(path)
  return not real.startswith((_LIBRARY + os.sep, *_installed()))


def _parse(path: str) -> tuple[str, list[tuple[int, str, tuple[str, ...]]]]:
  """(digest, imports) of a file, cached while unchanged; imports as ``(level, module, names)``,
  level -1 for ``import_beside``."""
  try:
    st = os.stat(path)
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    if path in _PARSED and _PARSED[path][0] == key:
      return _PARSED[path][1:]
    with open(path, 'rb') as f:
      raw = f.read()
  except OSError as e:
    raise SourceError(f'cannot read the source {path} ({e.strerror})') from None
  if not path.endswith('.py'):
    out = hashlib.sha256(raw).hexdigest(), []
  else:
    out = _tree(raw, path)
  _PARSED[path] = (key, *out)
  return out


def _tree(source: bytes | str, where: str) -> tuple[str, list]:
  try:
    tree = ast.parse(source, filename=where)
  except (SyntaxError, ValueError) as e:
    raise SourceError(f'cannot parse the source {where} ({e}); fix it') from None
  imports = []
  for node in ast.walk(tree):
    body = getattr(node, 'body', None)
    if (
      isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
      and body
      and isinstance(body[0], ast.Expr)
      and isinstance(body[0].value, ast.Constant)
      and isinstance(body[0].value.value, str)
    ):
      node.body = body[1:] or [ast.Pass()]  # a docstring changes no number
    if isinstance(node, ast.Import):
      imports += [(0, a.name, ()) for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      imports.append((node.level, node.module or '', tuple(a.name for a in node.names)))
    elif isinstance(node, ast.Call) and node.args:  # import_module('m'), import_beside(f, 'm')
      name = getattr(node.func, 'attr', getattr(node.func, 'id', ''))
      arg = node.args[-1] if name == 'import_beside' else node.args[0]
      if name in _CALLS and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        imports.append((-1 if name == 'import_beside' else 0, arg.value, ()))
  return hashlib.sha256(ast.dump(tree).encode()).hexdigest(), imports


def _locate(name: str) -> str | None:
  module = sys.modules.get(name)
  if module is not None:
    return getattr(module, '__file__', None)
  path, spec = None, None
  parts = name.split('.')
  for i in range(len(parts)):
    try:
      spec = importlib.machinery.PathFinder.find_spec('.'.join(parts[: i + 1]), path)
    except (ImportError, ValueError):
      return None
    if spec is None:
      return None
    path = spec.submodule_search_locations
  return spec.origin if spec is not None and spec.has_location else None


def _imported(name: str, path: str, imports) -> Iterable[tuple[str, str]]:
  package = name if os.path.basename(path) == '__init__.py' else name.rpartition('.')[0]
  for level, module, names in imports:
    if level < 0:  # afl_jax's import_beside: a file beside this one
      beside = os.path.join(os.path.dirname(path), f'{module}.py')
      if os.path.isfile(beside):
        yield f'_afl_jax_beside_{beside}', beside
      continue
    if level:  # relative: needs the package this module was imported in
      if not package or name.startswith(_HIDDEN):
        continue
      base = package.rsplit('.', level - 1)[0] if level > 1 else package
      module = f'{base}.{module}' if module else base
    parts = module.split('.')
    wanted = ['.'.join(parts[: i + 1]) for i in range(len(parts))]
    wanted += [f'{module}.{n}' for n in names if n != '*']
    for m in wanted:
      file = _locate(m)
      if file:
        yield m, file


def _display(name: str, path: str) -> str:
  """Its import name, or the file's stem for a module loaded by path."""
  if name and not name.startswith(_HIDDEN):
    return name
  return os.path.splitext(os.path.basename(path))[0]


def _value(x: Any, what: str, depth: int = 0) -> str:
  """A plain value as canonical text (arrays by their bytes, objects by their attributes)."""
  if depth > _DEPTH:
    raise SourceError(f'{what} holds values nested deeper than {_DEPTH}; pass them as settings')
  if x is None or isinstance(x, bool | int | float | complex | str | bytes | enum.Enum | np.dtype):
    return repr(x)
  if isinstance(x, list | tuple):
    return f'{type(x).__name__}({", ".join(_value(v, what, depth + 1) for v in x)})'
  if isinstance(x, Mapping):
    items = sorted((_value(k, what, depth + 1), _value(v, what, depth + 1)) for k, v in x.items())
    return '{' + ', '.join(f'{k}: {v}' for k, v in items) + '}'
  if hasattr(x, '__array__') and hasattr(x, 'dtype') and hasattr(x, 'shape'):
    a = np.ascontiguousarray(np.asarray(x))
    return f'array({a.dtype.str}, {a.shape}, {hashlib.sha256(a.tobytes()).hexdigest()})'
  if callable(x) or isinstance(x, types.ModuleType):  # inside a value: by its name
    return f'{getattr(x, "__module__", "")}.{getattr(x, "__qualname__", type(x).__qualname__)}'
  attrs = getattr(x, '__dict__', None)
  if attrs is None:
    raise SourceError(
      f'{what} holds a {type(x).__qualname__} whose value cannot be digested; pass it as a '
      'setting of the config instead'
    )
  return f'{type(x).__module__}.{type(x).__qualname__}{_value(attrs, what, depth + 1)}'


def _roots(
  obj: Any, what: str, seen: set[int], values: list[str]
) -> Iterable[tuple[str, str, str | None]]:
  """(module, file, source text when not on disk) of ``obj`` and of what it holds; its plain
  values appended to ``values``."""
  if id(obj) in seen or obj is None or isinstance(obj, str | bytes | int | float | bool):
    return
  seen.add(id(obj))
  if isinstance(obj, types.ModuleType):
    file = getattr(obj, '__file__', None)
    if file:
      yield obj.__name__, file, None
    return
  if isinstance(obj, functools.partial):
    yield from _roots(obj.func, what, seen, values)
    yield from _held(obj.args, obj.keywords, what, seen, values)
    return
  if inspect.ismethod(obj):
    yield from _roots(obj.__func__, what, seen, values)
    yield from _instance(obj.__self__, what, seen, values)
    return
  if inspect.isfunction(obj):
    file, text = obj.__code__.co_filename, None
    if not os.path.isfile(file):
      text = ''.join(linecache.getlines(file))  # a notebook cell keeps its source there
      if not text:
        raise SourceError(
          f'the source of {what} ({obj.__qualname__}) cannot be read: it '
          f'was defined in {file}; define it in a module file (.py) and import it'
        )
    yield obj.__module__ or '', file, text
    cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
    if os.path.realpath(file).startswith(_LIBRARY + os.sep):  # afl_jax's values: its own
      cells = [c for c in cells if callable(c) or isinstance(c, types.ModuleType)]
    yield from _held(cells, {}, what, seen, values)
    for held in (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
      yield from _roots(held, what, seen, values)  # plain defaults: in the signature, the config
    if hasattr(obj, '__wrapped__'):
      yield from _roots(obj.__wrapped__, what, seen, values)
    return
  if inspect.isclass(obj):
    for cls in obj.__mro__:
      file = getattr(sys.modules.get(cls.__module__), '__file__', None)
      if file:
        yield cls.__module__, file, None
      elif cls.__module__ == '__main__':  # a class of an interactive session
        raise SourceError(
          f'the source of {what} ({cls.__qualname__}, defined in an interactive session) '
          'cannot be read; define it in a module file (.py) and import it'
        )
    return
  if callable(obj):
    wrapped = getattr(obj, '__wrapped__', None)  # a jitted or decorated function
    if wrapped is not None:
      yield from _roots(wrapped, what, seen, values)
    if not inspect.isbuiltin(obj) and type(obj).__module__ != 'builtins':
      yield from _instance(obj, what, seen, values)


def _instance(obj: Any, what: str, seen: set[int], values: list[str]):
  yield from _roots(type(obj), what, seen, values)
  file = getattr(sys.modules.get(type(obj).__module__), '__file__', None)
  attrs = getattr(obj, '__dict__', None)
  if file and is_own(file) and attrs is not None:
    own = {k: v for k, v in attrs.items() if not k.startswith('__')}
    yield from _held((), own, what, seen, values)


def _held(args: Iterable[Any], keywords: Mapping[str, Any], what, seen, values):
  for key, x in [('', a) for a in args] + sorted(keywords.items()):
    if callable(x) or isinstance(x, types.ModuleType):
      yield from _roots(x, what, seen, values)
      continue
    values.append(f'{key}={_value(x, what)}' if key else _value(x, what))
    if type(x).__module__ not in ('builtins', 'numpy'):
      yield from _roots(type(x), what, seen, values)


def _filled(cell) -> bool:
  try:
    cell.cell_contents  # noqa: B018
  except ValueError:  # an empty cell
    return False
  return True


def digests(components: Iterable[tuple[str, Any]]) -> dict[str, str]:
  """``{module name: digest}`` of the own modules the ``(what, component)`` pairs reach."""
  out: dict[str, str] = {}
  todo, done, seen = [], set(), set()
  for what, obj in components:
    values: list[str] = []
    todo += list(_roots(obj, what, seen, values))
    if values:  # a registered partial's arguments, a closure's values
      out[f'{HELD}{what}'] = hashlib.sha256('\n'.join(values).encode()).hexdigest()
  while todo:
    name, path, text = todo.pop()
    if text is None:
      if not path or not os.path.isfile(path) or not is_own(path):
        continue
      path = os.path.realpath(path)
    if path in done:
      continue
    done.add(path)
    digest, imports = _parse(path) if text is None else _tree(text, path)
    key = _display(name, path)
    while out.get(key, digest) != digest:  # two files of one name
      key += "'"
    out[key] = digest
    todo += [(m, file, None) for m, file in _imported(name, path, imports)]
  return dict(sorted(out.items()))
