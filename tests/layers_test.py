"""No module of afl_jax imports (lazily included, read with :mod:`ast`) from a layer above its
own or from a sibling (issue 23); ``afl_jax/__init__.py``, the facade, is exempt."""

import ast
import graphlib
import importlib
import pathlib
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / 'afl_jax'

LAYERS = (  # lowest first; the packages of one layer are siblings
  ('errors', 'checks'), ('registry',), ('schedules', 'data', 'models'), ('core',),
  ('compression',), ('algorithms',), ('clients', 'servers'), ('problems', 'api'), ('pipeline',),
  ('results',), ('reproduction',),
)  # fmt: skip
RANK = {group: i for i, layer in enumerate(LAYERS) for group in layer}


def _name(path: pathlib.Path) -> str:
  parts = path.relative_to(ROOT.parent).with_suffix('').parts
  return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


MODULES = {_name(p): p for p in sorted(ROOT.rglob('*.py'))}


def _resolve(name: str) -> str:
  while name not in MODULES:
    name = name.rpartition('.')[0]
  return name


def imports(module: str) -> set[str]:
  path = MODULES[module]
  package = module if path.name == '__init__.py' else module.rpartition('.')[0]
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      found |= {a.name for a in node.names if a.name.startswith('afl_jax.')}
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        anchor = package.split('.')[: len(package.split('.')) - node.level + 1]
        base = '.'.join(anchor + ([base] if base else []))
      if base == 'afl_jax' or base.startswith('afl_jax.'):
        found |= {_resolve(f'{base}.{a.name}') for a in node.names}
  return {_resolve(n) for n in found} - {module}


def _group(module: str) -> str | None:
  parts = module.split('.')
  return parts[1] if len(parts) > 1 else None


def test_every_group_has_a_layer():
  groups = {_group(m) for m in MODULES} - {None}
  assert groups <= set(RANK), f'modules with no layer: {sorted(groups - set(RANK))}'


@pytest.mark.parametrize('module', sorted(m for m in MODULES if m != 'afl_jax'))
def test_imports_go_down_or_within(module):
  own = _group(module)
  bad = []
  for target in sorted(imports(module)):
    other = _group(target)
    if other is None:
      bad.append(f'{target} (the facade)')
    elif other != own and RANK[other] >= RANK[own]:
      kind = 'sibling' if RANK[other] == RANK[own] else 'higher'
      bad.append(f'{target} ({kind} layer)')
  assert not bad, f'{module} imports {bad}'


def test_no_import_cycle():
  graph = {m: imports(m) for m in MODULES if m != 'afl_jax'}
  graphlib.TopologicalSorter(graph).prepare()  # CycleError naming a cycle


@pytest.mark.parametrize(
  'package', sorted(m for m, p in MODULES.items() if p.name == '__init__.py')
)
def test_no_package_attribute_shadows_a_submodule(package):
  """``from afl_jax.pipeline import build`` gives the module, not a function of that name."""
  pkg = importlib.import_module(package)
  subs = [m for m in MODULES if m.rpartition('.')[0] == package]
  found = {m: getattr(pkg, m.rpartition('.')[2], None) for m in subs}  # None: not imported
  shadowed = [m for m, a in found.items() if a is not None and not isinstance(a, types.ModuleType)]
  assert not shadowed, f'{package} exports names that shadow its modules: {shadowed}'
