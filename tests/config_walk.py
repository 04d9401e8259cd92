"""A static walk of the config from the functions ``scripts/train.py`` hands it to.

Read with :mod:`ast` only (nothing of the walked code runs): starting from each function
``scripts/train.py`` hands the config to (:func:`roots`: ``cli.finish_config``, which
applies the command line's hyperparameters, ``loop.train_and_evaluate`` for a single run,
``sweep.train_sweep`` for a config with a ``sweep`` section), every call
that passes the config on is followed into the function it resolves to (through the
calling module's imports, re-exports, module-level instances such as
``ALGORITHMS = Registry(...)`` and locals built from a class), recursively.

What counts as "the config": the root's ``config`` parameter; a section of it
(``c.schedule``, ``config['hparams']``: attribute or literal-key access to one of
:func:`sections`); a copy of it (``ConfigDict(c.to_dict())``, ``c.copy_and_resolve_references()``,
``copy.deepcopy(c)``); what a package function returns from it when its return
annotation is a ``ConfigDict``. A *carrier* is an object holding the config (an instance
of a package class with a field annotated ``ConfigDict``, e.g. ``build.Run``, and lists of
them); a call passing a carrier is followed too, and counts where the callee (or one it
passes the carrier to) reads the carrier's config. A plain value read from the config
(``c.num_rounds``, ``dict(c.hparams)``) is not the config: passing it is what a component
should receive.

The walk is a depth-first sequence of modules: the callee's module on each call, the
caller's again on each return. Its measures:

* ``modules``: distinct modules the config enters;
* ``stays``: maximal runs of one module in that sequence;
* ``returns``: stays in a module the config had already left;
* ``climbs``: calls from a module of a lower layer into one of a higher layer
  (:data:`LAYERS`, highest first);
* ``checks``: where a value read from the config is handed to a range check
  (:data:`CHECKS`, a ``Spec``'s ``violation``, or a package function that calls one).

``python tests/config_walk.py`` prints them with the path, the climbs and the checks.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import sys
from collections.abc import Iterable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Where the config comes from: scripts/train.py's ``main`` gets it from the flag
# (``_CONFIG.value``) and hands it on; every package function it hands it to is a root.
SCRIPT = ('scripts.train', 'main')
SCRIPT_CONFIG = ('config', '_CONFIG.value')

# Layers, highest first: a call may go to the same layer or a lower one, never back up.
# A module belongs to the first layer one of whose prefixes it starts with.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
  ('scripts', ('scripts',)),
  ('reproduction', ('afl_jax.reproduction',)),
  (
    'pipeline drivers',
    ('afl_jax.pipeline.loop', 'afl_jax.pipeline.sweep', 'afl_jax.pipeline.cli'),
  ),
  ('pipeline build', ('afl_jax.pipeline.build',)),
  ('pipeline config', ('afl_jax.pipeline.config',)),
  ('pipeline services', ('afl_jax.pipeline', 'afl_jax.results', 'afl_jax.api')),
  (
    'components',
    (
      'afl_jax.algorithms',
      'afl_jax.clients',
      'afl_jax.servers',
      'afl_jax.schedules',
      'afl_jax.compression',
      'afl_jax.data',
      'afl_jax.models',
    ),
  ),
  ('core', ('afl_jax.core', 'afl_jax.registry', 'afl_jax.ranges', 'afl_jax.errors')),
)

# Where the config's sections are declared: ``c.NAME = ml_collections.ConfigDict(...)`` in
# this function makes NAME a section (any other field read from the config is a value).
DEFAULT = ('afl_jax.pipeline.config', 'default')
# Methods of a ConfigDict that give a copy of it (``to_dict``: the same values as a dict).
COPY_METHODS = frozenset({'copy_and_resolve_references', 'copy', 'to_dict'})
CARRIER_FIELD = 'config'
# The range checks (``Registry.bind``, ``Registry.violation``; any ``.violation(...)`` call is
# a ``ranges.Spec``'s); a function calling one is a check too.
CHECKS = (('afl_jax.registry', 'Registry.bind'), ('afl_jax.registry', 'Registry.violation'))

CONFIG, CARRIER, VALUE = 'config', 'carrier', 'value'


def layer(module: str) -> int:
  """The index of ``module``'s layer in :data:`LAYERS` (0 = highest)."""
  for i, (_, prefixes) in enumerate(LAYERS):
    if any(module == p or module.startswith(p + '.') for p in prefixes):
      return i
  raise KeyError(f'module {module} is in no layer of LAYERS')


# ---- the package's modules, read once ------------------------------------------------------
@dataclasses.dataclass
class Module:
  name: str
  path: str
  tree: ast.Module
  is_package: bool
  names: dict[str, ast.AST]  # top-level defs, classes, assignments
  imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None)


def _module_name(path: str) -> tuple[str, bool]:
  rel = os.path.relpath(path, ROOT)[: -len('.py')].split(os.sep)
  if rel[-1] == '__init__':
    return '.'.join(rel[:-1]), True
  return '.'.join(rel), False


def _imports(body: Iterable[ast.stmt], module: str, is_package: bool) -> dict:
  out = {}
  for node in body:
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.asname:
          out[a.asname] = (a.name, None)
        else:
          out[a.name.split('.')[0]] = (a.name.split('.')[0], None)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        parts = module.split('.')
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = '.'.join(parts[:keep] + ([base] if base else []))
      for a in node.names:
        out[a.asname or a.name] = (base, a.name)
  return out


def load_modules() -> dict[str, Module]:
  """Every module of ``afl_jax/`` and ``scripts/`` by dotted name."""
  out = {}
  for top in ('afl_jax', 'scripts'):
    for folder, _, files in os.walk(os.path.join(ROOT, top)):
      for file in sorted(files):
        if not file.endswith('.py'):
          continue
        path = os.path.join(folder, file)
        with open(path, encoding='utf-8') as f:
          tree = ast.parse(f.read(), path)
        name, is_package = _module_name(path)
        names = {}
        for node in tree.body:
          if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
          elif isinstance(node, ast.Assign):
            for t in node.targets:
              if isinstance(t, ast.Name):
                names[t.id] = node
          elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        imports = _imports(
          (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)),
          name,
          is_package,
        )
        out[name] = Module(name, path, tree, is_package, names, imports)
  return out


# ---- resolving names ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Target:
  """What a name resolves to: a module, a function, a class, or an instance of a class."""

  kind: str  # 'module' | 'function' | 'class' | 'instance'
  module: str
  node: ast.AST | None = None
  owner: ast.ClassDef | None = None  # a method's class

  @property
  def qualname(self) -> str:
    name = getattr(self.node, 'name', '?')
    return f'{self.owner.name}.{name}' if self.owner is not None else name


class Resolver:
  def __init__(self, modules: dict[str, Module]):
    self.modules = modules

  def module_attr(self, module: str, attr: str, depth: int = 0) -> Target | None:
    """``module.attr``: a submodule, a definition, or a re-export followed to its source."""
    if depth > 20:
      return None
    sub = f'{module}.{attr}'
    m = self.modules.get(module)
    if m is None:
      return None
    node = m.names.get(attr)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
      return Target('function', module, node)
    if isinstance(node, ast.ClassDef):
      return Target('class', module, node)
    if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
      made = self.expr(node.value.func, module, {})
      if made is not None and made.kind == 'class':
        return Target('instance', made.module, made.node)
      if made is not None and made.kind == 'function':  # NAME = factory(...): its return class
        cls = self.annotation_class(made)
        if cls is not None:
          return Target('instance', cls.module, cls.node)
    if attr in m.imports and m.imports[attr] != (module, attr):
      src, name = m.imports[attr]
      if name is None:
        return Target('module', src) if src in self.modules else None
      return self.import_target(src, name, depth + 1)
    if sub in self.modules:
      return Target('module', sub)
    return None

  def import_target(self, src: str, name: str, depth: int = 0) -> Target | None:
    if f'{src}.{name}' in self.modules and name not in self.modules.get(src, _EMPTY).names:
      return Target('module', f'{src}.{name}')
    return self.module_attr(src, name, depth)

  def annotation_class(self, fn: Target) -> Target | None:
    ann = getattr(fn.node, 'returns', None)
    if ann is None:
      return None
    t = self.expr(ann, fn.module, {})
    return t if t is not None and t.kind == 'class' else None

  def method(self, cls: Target, name: str) -> Target | None:
    """``name`` defined on ``cls`` or a package base class of it."""
    seen = 0
    todo = [cls]
    while todo and seen < 20:
      seen += 1
      c = todo.pop(0)
      for item in c.node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
          return Target('function', c.module, item, owner=c.node)
      for base in c.node.bases:
        b = self.expr(base, c.module, {})
        if b is not None and b.kind == 'class':
          todo.append(b)
    return None

  def expr(self, node: ast.AST, module: str, local: dict[str, Target]) -> Target | None:
    """What ``node`` (a Name or an attribute chain) resolves to in ``module``."""
    if isinstance(node, ast.Name):
      if node.id in local:
        return local[node.id]
      m = self.modules[module]
      if node.id in m.names:
        return self.module_attr(module, node.id)
      if node.id in m.imports:
        src, name = m.imports[node.id]
        if name is None:
          return Target('module', src) if src in self.modules else None
        return self.import_target(src, name)
      return None
    if isinstance(node, ast.Attribute):
      base = self.expr(node.value, module, local)
      if base is None:
        return None
      if base.kind == 'module':
        return self.module_attr(base.module, node.attr)
      if base.kind in ('instance', 'class'):
        return self.method(Target('class', base.module, base.node), node.attr)
      return None
    if isinstance(node, ast.Subscript):  # list[Run], Optional[...]: the inner class
      return self.expr(node.slice, module, local)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
      try:
        return self.expr(ast.parse(node.value, mode='eval').body, module, local)
      except SyntaxError:
        return None
    if isinstance(node, ast.BinOp):  # Run | None
      return self.expr(node.left, module, local) or self.expr(node.right, module, local)
    return None


_EMPTY = Module('', '', ast.Module(body=[], type_ignores=[]), False, {}, {})


# ---- one function's body: which names hold the config, which calls pass it on -------------
def _is_configdict(ann: ast.AST | None) -> bool:
  return ann is not None and 'ConfigDict' in ast.unparse(ann)


def _params(fn: ast.FunctionDef) -> list[str]:
  a = fn.args
  return [p.arg for p in a.posonlyargs + a.args]


def sections(modules: dict[str, Module]) -> frozenset[str]:
  """The config's sections, as :data:`DEFAULT` declares them."""
  fn = modules[DEFAULT[0]].names[DEFAULT[1]]
  out = set()
  for node in ast.walk(fn):
    if (
      isinstance(node, ast.Assign)
      and isinstance(node.value, ast.Call)
      and ast.unparse(node.value.func).endswith('ConfigDict')
    ):
      out |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
  return frozenset(out)


class Walker:
  """Walks the config through the package (see the module docstring)."""

  def __init__(self, modules: dict[str, Module] | None = None):
    self.modules = modules if modules is not None else load_modules()
    self.resolve = Resolver(self.modules)
    self.carrier_classes = self._carrier_classes()
    self.sections = sections(self.modules)
    self.checkers = self._checkers()

  # -- what the package declares --
  def _carrier_classes(self) -> set[tuple[str, str]]:
    out = set()
    for m in self.modules.values():
      for node in m.names.values():
        if isinstance(node, ast.ClassDef):
          for item in node.body:
            if (
              isinstance(item, ast.AnnAssign)
              and isinstance(item.target, ast.Name)
              and item.target.id == CARRIER_FIELD
              and _is_configdict(item.annotation)
            ):
              out.add((m.name, node.name))
    return out

  def _functions(self) -> Iterator[Target]:
    for m in self.modules.values():
      for node in m.names.values():
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
          yield Target('function', m.name, node)
        elif isinstance(node, ast.ClassDef):
          for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
              yield Target('function', m.name, item, owner=node)

  def _checkers(self) -> set[tuple[str, str]]:
    """Functions that check values against declared ranges: :data:`CHECKS` and every
    package function that calls one (to a fixed point)."""
    calls = {}
    for fn in self._functions():
      local = self._locals(fn)
      out = set()
      for call in (n for n in ast.walk(fn.node) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Attribute) and call.func.attr == 'violation':
          out.add(('', 'violation'))  # a Spec's check (or a registry's)
        callee = self.resolve.expr(call.func, fn.module, local)
        if callee is not None and callee.kind == 'function':
          out.add((callee.module, callee.qualname))
      calls[(fn.module, fn.qualname)] = out
    found = set(CHECKS) | {('', 'violation')}
    while True:
      more = {f for f, callees in calls.items() if callees & found} - found
      if not more:
        return found
      found |= more

  def _returns(self, fn: Target) -> str | None:
    ann = getattr(fn.node, 'returns', None)
    if _is_configdict(ann):
      return CONFIG
    cls = self.resolve.annotation_class(fn) if ann is not None else None
    if cls is not None and (cls.module, cls.node.name) in self.carrier_classes:
      return CARRIER
    return None

  def _locals(self, fn: Target) -> dict[str, Target]:
    """Local names bound to package classes' instances: ``self``, parameters annotated with
    a package class, ``ckpt = checkpoint.Checkpointer(...)``."""
    local: dict[str, Target] = {}
    args = fn.node.args
    for i, a in enumerate(args.posonlyargs + args.args + args.kwonlyargs):
      if i == 0 and fn.owner is not None and not _static(fn.node):
        local[a.arg] = Target('instance', fn.module, fn.owner)
      elif a.annotation is not None:
        t = self.resolve.expr(a.annotation, fn.module, {})
        if t is not None and t.kind == 'class':
          local[a.arg] = Target('instance', t.module, t.node)
    for node in ast.walk(fn.node):
      if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
        made = self.resolve.expr(node.value.func, fn.module, local)
        if made is not None and made.kind == 'class':
          for t in node.targets:
            if isinstance(t, ast.Name):
              local[t.id] = Target('instance', made.module, made.node)
    return local

  # -- one function's body --
  def taint(self, node: ast.AST, names: dict[str, str], fn: Target, local) -> str | None:
    """CONFIG or CARRIER where ``node`` is the config (a section, a copy) or holds it;
    VALUE where it is a name bound to something read from it; else None."""
    if isinstance(node, ast.Name):
      return names.get(node.id)
    if isinstance(node, ast.Attribute):
      base = self.taint(node.value, names, fn, local)
      if base == CONFIG and node.attr in self.sections:
        return CONFIG
      if base == CARRIER and node.attr == CARRIER_FIELD:
        return CONFIG
      return None
    if isinstance(node, ast.Subscript):
      base = self.taint(node.value, names, fn, local)
      key = node.slice
      if base == CONFIG and isinstance(key, ast.Constant) and key.value in self.sections:
        return CONFIG
      return CARRIER if base == CARRIER else None
    if isinstance(node, ast.IfExp | ast.BoolOp):
      for v in [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values:
        t = self.taint(v, names, fn, local)
        if t in (CONFIG, CARRIER):
          return t
      return None
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
      found = {self.taint(e, names, fn, local) for e in node.elts}
      return CARRIER if found & {CARRIER, CONFIG} else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
      found = {self.taint(node.left, names, fn, local), self.taint(node.right, names, fn, local)}
      return CARRIER if CARRIER in found else None
    if isinstance(node, ast.ListComp | ast.GeneratorExp):
      inner = dict(names)
      for gen in node.generators:
        if self.taint(gen.iter, inner, fn, local) == CARRIER:
          inner.update({n.id: CARRIER for n in ast.walk(gen.target) if isinstance(n, ast.Name)})
      return CARRIER if self.taint(node.elt, inner, fn, local) in (CONFIG, CARRIER) else None
    if isinstance(node, ast.Call):
      return self._call_taint(node, names, fn, local)
    return None

  def _call_taint(self, node: ast.Call, names, fn: Target, local) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in COPY_METHODS:
      if self.taint(func.value, names, fn, local) == CONFIG:
        return CONFIG
    if isinstance(func, ast.Attribute) and func.attr == 'get' and node.args:  # c.get('schedule')
      key = node.args[0]
      if isinstance(key, ast.Constant) and key.value in self.sections:
        return CONFIG if self.taint(func.value, names, fn, local) == CONFIG else None
    args = list(node.args) + [k.value for k in node.keywords]
    passed = {self.taint(a, names, fn, local) for a in args} & {CONFIG, CARRIER}
    text = ast.unparse(func)
    if text.endswith('ConfigDict') or text in ('copy.deepcopy', 'copy.copy'):
      return CONFIG if passed else None
    if not passed:
      return None
    target = self.resolve.expr(func, fn.module, local)
    if target is not None and target.kind == 'function':
      return self._returns(target)
    if target is not None and target.kind == 'class':
      return CARRIER if (target.module, target.node.name) in self.carrier_classes else None
    return None

  def read(self, node: ast.AST, names: dict[str, str], fn: Target, local) -> str | None:
    """VALUE where ``node`` reads anything of the config (``c.num_rounds``, ``dict(c.hparams)``)."""
    for sub in ast.walk(node):
      if isinstance(sub, ast.Name) and names.get(sub.id):
        return VALUE
    return None

  def names_of(self, fn: Target, given: dict[str, str], local) -> dict[str, str]:
    """Every local name holding the config, a carrier, or a value read from them
    (flow-insensitive, to a fixed point)."""
    names = dict(given)
    while True:
      before = dict(names)
      for node in ast.walk(fn.node):
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
          pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
          pairs = [(node.target, node.value)]
        elif isinstance(node, ast.For | ast.comprehension):
          it = self.taint(node.iter, names, fn, local)
          kind = CARRIER if it == CARRIER else self.read(node.iter, names, fn, local)
          for t in ast.walk(node.target):
            if kind and isinstance(t, ast.Name) and names.get(t.id) in (None, VALUE):
              names[t.id] = kind
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
          pairs = [(node.optional_vars, node.context_expr)]
        for target, value in pairs:
          if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            pairs.extend(zip(target.elts, value.elts))
            continue
          t = self.taint(value, names, fn, local) or self.read(value, names, fn, local)
          if isinstance(target, ast.Name):
            if t and names.get(target.id) in (None, VALUE):
              names[target.id] = t
            continue
          for n in ast.walk(target):  # unpacked: each part is a value read from it
            if t and isinstance(n, ast.Name) and n.id not in names:
              names[n.id] = VALUE
      if names == before:
        return names

  def body(self, fn: Target, given: dict[str, str]) -> Body:
    """The calls in ``fn`` (evaluation order) that pass the config or a carrier on, and
    those that hand a value read from the config to a range check."""
    local = self._locals(fn)
    names = self.names_of(fn, given, local)
    out = Body(reads=CONFIG in names.values())
    for n in ast.walk(fn.node):
      if isinstance(n, ast.Attribute) and n.attr == CARRIER_FIELD:
        out.reads |= self.taint(n.value, names, fn, local) == CARRIER
    found = [n for n in ast.walk(fn.node) if isinstance(n, ast.Call)]
    found.sort(key=lambda n: (n.end_lineno, n.end_col_offset))
    for call in found:
      args = list(call.args) + [k.value for k in call.keywords]
      callee = self.resolve.expr(call.func, fn.module, local)
      name = (callee.module, callee.qualname) if callee is not None else None
      spec_check = isinstance(call.func, ast.Attribute) and call.func.attr == 'violation'
      passed = {self.taint(a, names, fn, local) for a in args}
      # a value read from the config handed to a check (a call passing the config itself is
      # walked, and its checks found inside)
      if (spec_check or name in self.checkers) and not passed & {CONFIG, CARRIER}:
        if any(self.read(a, names, fn, local) for a in args):
          out.checks.append((fn.module, fn.qualname, call.lineno, ast.unparse(call.func)))
      if callee is None or callee.kind not in ('function', 'class'):
        continue
      if callee.kind == 'class':
        init = self.resolve.method(callee, '__init__')
        if init is None:
          continue
        callee, bound = init, True
      else:
        bound = callee.owner is not None and not _static(callee.node)
        if bound and isinstance(call.func, ast.Attribute):  # Class.method(obj, ...): explicit
          base = self.resolve.expr(call.func.value, fn.module, local)
          bound = base is None or base.kind != 'class'
      params = _params(callee.node)[1 if bound else 0 :]
      receives: dict[str, str] = {}
      for p, a in zip(params, call.args):
        if isinstance(a, ast.Starred):
          break
        t = self.taint(a, names, fn, local)
        if t in (CONFIG, CARRIER):
          receives[p] = t
      for k in call.keywords:
        t = self.taint(k.value, names, fn, local)
        if t in (CONFIG, CARRIER) and k.arg is not None:
          receives[k.arg] = t
      if receives:
        out.calls.append((callee, receives))
    return out

  # -- the walk --
  def walk(self, module: str, function: str, param: str) -> Walk:
    """The walk from ``module.function`` whose ``param`` is the config."""
    root = self.resolve.module_attr(module, function)
    assert root is not None and root.kind == 'function', (module, function)
    out = Walk()
    out.enter(root, None)
    self._visit(root, {param: CONFIG}, out, stack=())
    return out

  def _visit(self, fn: Target, given: dict[str, str], out: Walk, stack: tuple) -> bool:
    """Walk ``fn``; True where the config (not only a carrier of it) is read in it or below."""
    key = (fn.module, fn.qualname, tuple(sorted(given.items())))
    if key in stack:
      return False
    body = self.body(fn, given)
    out.checks.extend(body.checks)
    touched = body.reads
    for callee, receives in body.calls:
      mark = out.mark()
      out.enter(callee, fn)
      used = self._visit(callee, receives, out, stack + (key,))
      if used or CONFIG in receives.values():
        out.enter(fn, None)  # back in the caller
        touched = True
      else:
        out.undo(mark)  # only a carrier whose config it never reads
    return touched


def _static(node: ast.FunctionDef) -> bool:
  return any(ast.unparse(d) in ('staticmethod', 'classmethod') for d in node.decorator_list)


@dataclasses.dataclass
class Body:
  reads: bool
  calls: list[tuple[Target, dict[str, str]]] = dataclasses.field(default_factory=list)
  checks: list[tuple[str, str, int, str]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Walk:
  """One walk: the module of each step, the calls (caller, callee) and the range checks
  handed a value of the config (module, function, line, what it calls)."""

  path: list[str] = dataclasses.field(default_factory=list)
  entered: list[str] = dataclasses.field(default_factory=list)  # 'module.function' per call
  edges: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
  checks: list[tuple[str, str, int, str]] = dataclasses.field(default_factory=list)

  def mark(self) -> tuple[int, int, int]:
    return len(self.path), len(self.edges), len(self.entered)

  def undo(self, mark: tuple[int, int, int]) -> None:
    del self.path[mark[0] :]
    del self.edges[mark[1] :]
    del self.entered[mark[2] :]

  def enter(self, fn: Target, caller: Target | None) -> None:
    self.path.append(fn.module)
    if caller is not None:
      self.entered.append(f'{fn.module}.{fn.qualname}')
      self.edges.append((caller.module, fn.module, f'{caller.module}.{caller.qualname}'))

  def count(self, function: str) -> int:
    """How often the walk enters ``function`` (``'afl_jax.pipeline.config.resolve'``)."""
    return self.entered.count(function)

  @property
  def stays(self) -> list[str]:
    out: list[str] = []
    for m in self.path:
      if not out or out[-1] != m:
        out.append(m)
    return out

  @property
  def modules(self) -> list[str]:
    return list(dict.fromkeys(self.path))

  @property
  def returns(self) -> int:
    return len(self.stays) - len(self.modules)

  @property
  def climbs(self) -> list[tuple[str, str, str]]:
    return [e for e in self.edges if layer(e[1]) < layer(e[0])]

  def figures(self) -> dict[str, int]:
    return {
      'modules': len(self.modules),
      'stays': len(self.stays),
      'climbs': len(self.climbs),
      'returns': self.returns,
    }


def roots(walker: Walker) -> list[tuple[str, str, str]]:
  """(module, function, parameter) of each call in :data:`SCRIPT` that hands over the
  config (an argument among :data:`SCRIPT_CONFIG`), in the script's order."""
  module, function = SCRIPT
  fn = walker.resolve.module_attr(module, function)
  out = []
  calls = sorted((n for n in ast.walk(fn.node) if isinstance(n, ast.Call)), key=lambda n: n.lineno)
  for call in calls:
    for i, a in enumerate(call.args):
      if ast.unparse(a) in SCRIPT_CONFIG:
        callee = walker.resolve.expr(call.func, module, {})
        if callee is not None and callee.kind == 'function':
          out.append((callee.module, callee.qualname, _params(callee.node)[i]))
  return out


def walks(walker: Walker | None = None) -> dict[str, Walk]:
  """The walk from each of :func:`roots`, by ``module.function``."""
  walker = walker or Walker()
  return {f'{m}.{f}': walker.walk(m, f, p) for m, f, p in roots(walker)}


def joined(found: dict[str, Walk]) -> Walk:
  """The roots' walks one after the other (train.py's: the config's whole path)."""
  total = Walk()
  for w in found.values():
    total.path.extend(w.path)
    total.edges.extend(w.edges)
    total.entered.extend(w.entered)
    total.checks.extend(w.checks)
  return total


def main() -> None:
  found = walks()
  for name, w in {**found, 'all': joined(found)}.items():
    print(f'{name}: {w.figures()}')
    print('  modules: ' + ', '.join(w.modules))
    if name != 'all':
      print('  path: ' + ' > '.join(s.rsplit('afl_jax.', 1)[-1] for s in w.stays))
    for _, callee, where in w.climbs:
      print(f'  climb: {where} -> {callee}')
    for module, function, line, what in dict.fromkeys(w.checks):
      print(f'  range check: {module}.{function} line {line}: {what}(...)')


if __name__ == '__main__':
  sys.path.insert(0, ROOT)
  main()
