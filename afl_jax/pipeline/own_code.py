"""The researcher's own code a run depends on: every module outside afl_jax, the installed
packages and the standard library that a run's components reach, followed through their
imports, each digested as its parsed tree (docstrings, comments and layout do not count);
docs/reliability.md, "One identity".

A component may be any callable: a function, a ``functools.partial``, a class, a closure, a
lambda, a bound method or a callable object; what it holds (a partial's arguments, a
closure's cells, a method's instance) is followed too. A source that cannot be read is a
:class:`SourceError` (one line), never skipped."""

from __future__ import annotations

import ast
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
from collections.abc import Iterable
from typing import Any

from afl_jax.errors import UserError

_LIBRARY = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_HIDDEN = ('_afl_jax_beside_', 'afl_jax_config_file', '__main__')  # modules loaded by path
_CALLS = ('import_module', '__import__', 'import_beside')  # imports written as calls
_PARSED: dict[str, tuple[tuple, str, list]] = {}  # path -> (stat key, digest, imports)


class SourceError(UserError):
  """A component whose source cannot be read: its numbers could change unseen."""


@functools.cache
def _installed() -> tuple[str, ...]:
  """Where the standard library and the installed packages live (real paths)."""
  paths = sysconfig.get_paths()
  roots = [paths[k] for k in ('stdlib', 'platstdlib', 'purelib', 'platlib') if paths.get(k)]
  roots += [*site.getsitepackages(), site.getusersitepackages(), os.path.dirname(os.__file__)]
  return tuple(sorted({os.path.realpath(r) + os.sep for r in roots}))


def is_own(path: str) -> bool:
  """Is ``path`` a researcher's file: not afl_jax's, an installed package's or Python's?"""
  real = os.path.realpath(path)
  return not real.startswith((_LIBRARY + os.sep, *_installed()))


def _parse(path: str) -> tuple[str, list[tuple[int, str, tuple[str, ...]]]]:
  """(digest, imports) of one file: a ``.py`` file's tree without docstrings, else its bytes;
  imports as ``(level, module, names)`` (level -1: ``import_beside``, afl_jax's import of a
  module beside a config file); cached while the file is unchanged."""
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
  """The file of module ``name`` (imported, else found on ``sys.path`` without importing)."""
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
  """(name, file) of each module an ``import`` of module ``name`` (file ``path``) runs."""
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
  """A module's name in the identity: its import name, or its file's stem for a module loaded
  by path (a config file, a module beside it, a script): the same files anywhere, one name."""
  if name and not name.startswith(_HIDDEN):
    return name
  return os.path.splitext(os.path.basename(path))[0]


def _roots(obj: Any, what: str, seen: set[int]) -> Iterable[tuple[str, str, str | None]]:
  """(module name, file, source text of a file that is not on disk) where ``obj`` is defined,
  and of what it holds."""
  if id(obj) in seen or obj is None or isinstance(obj, str | bytes | int | float | bool):
    return
  seen.add(id(obj))
  if isinstance(obj, types.ModuleType):
    file = getattr(obj, '__file__', None)
    if file:
      yield obj.__name__, file, None
    return
  if isinstance(obj, functools.partial):
    for held in (obj.func, *obj.args, *obj.keywords.values()):
      yield from _roots(held, what, seen)
    return
  if inspect.ismethod(obj):
    yield from _roots(obj.__func__, what, seen)
    yield from _roots(obj.__self__, what, seen)
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
    for held in (*cells, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
      yield from _roots(held, what, seen)
    if hasattr(obj, '__wrapped__'):
      yield from _roots(obj.__wrapped__, what, seen)
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
      yield from _roots(wrapped, what, seen)
    if not inspect.isbuiltin(obj) and type(obj).__module__ != 'builtins':
      yield from _roots(type(obj), what, seen)
      for held in getattr(obj, '__dict__', {}).values():
        if callable(held):
          yield from _roots(held, what, seen)


def _filled(cell) -> bool:
  try:
    cell.cell_contents  # noqa: B018
  except ValueError:  # an empty cell
    return False
  return True


def digests(components: Iterable[tuple[str, Any]]) -> dict[str, str]:
  """``{module name: digest}`` of the researcher's modules the ``(what, component)`` pairs
  reach (``what`` names a component in a refusal, e.g. ``"model 'tiny'"``)."""
  out: dict[str, str] = {}
  todo, done, seen = [], set(), set()
  for what, obj in components:
    todo += list(_roots(obj, what, seen))
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
