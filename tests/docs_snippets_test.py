"""Every example in README.md and docs/ works as written: each ```python block runs (one
after ``<!-- not-run: reason -->`` is only compiled); each ``--config.X=`` override names a
real field (``hparams.NAME``: a setting of the algorithm, built with those values)."""

import pathlib
import re

import pytest
from ml_collections.config_flags import config_path

import afl_jax
from afl_jax.pipeline import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]
NOT_RUN = re.compile(r'<!--\s*not-run:\s*(.+?)\s*-->')
FENCE = re.compile(r'^```(\w*)\s*$')


def _blocks(page: pathlib.Path):
  """(language, first line number, text, not-run reason or None) of each fenced block."""
  lines = page.read_text().splitlines()
  out, i = [], 0
  while i < len(lines):
    m = FENCE.match(lines[i])
    if not m:
      i += 1
      continue
    start, body = i, []
    i += 1
    while i < len(lines) and not lines[i].startswith('```'):
      body.append(lines[i])
      i += 1
    prev = next((ln for ln in reversed(lines[:start]) if ln.strip()), '')
    reason = NOT_RUN.search(prev)
    out.append((m.group(1), start + 1, '\n'.join(body), reason and reason.group(1)))
    i += 1
  return out


PYTHON = [
  pytest.param(text, reason, id=f'{page.relative_to(ROOT)}:{line}')
  for page in PAGES
  for lang, line, text, reason in _blocks(page)
  if lang == 'python'
]


@pytest.mark.parametrize('text, not_run', PYTHON)
def test_python_block_runs_as_written(text, not_run):
  code = compile(text, '<snippet>', 'exec')
  if not_run:
    pytest.skip(f'marked not-run: {not_run}')
  registries = _registries()
  before = {id(r): set(r.names()) for r in registries}
  try:
    exec(code, {'__name__': '__snippet__'})
  finally:  # a snippet's own components leave no trace in the other tests of this process
    for r in registries:
      for name in set(r.names()) - before[id(r)]:
        r.unregister(name)


def _registries():
  import afl_jax
  from afl_jax.schedules.registry import DURATIONS

  return (
    afl_jax.algorithms.ALGORITHMS,
    afl_jax.clients.CLIENTS,
    afl_jax.servers.SERVERS,
    afl_jax.schedules.SCHEDULES,
    DURATIONS,
    afl_jax.compression.COMPRESSORS,
    afl_jax.data.DATASETS,
    afl_jax.models.MODELS,
  )


def _commands(page: pathlib.Path):
  """Every command (bash logical line or inline code span) with a --config. override."""
  text = page.read_text()
  found = []
  for lang, line, body, _ in _blocks(page):
    if lang in ('bash', 'sh', 'shell'):
      for cmd in body.replace('\\\n', ' ').splitlines():
        if '--config.' in cmd:
          found.append((f'{page.relative_to(ROOT)}:{line}', cmd))
  prose = re.sub(r'^```.*?^```', '', text, flags=re.S | re.M)
  for span in re.findall(r'`([^`\n]+)`', prose):
    if '--config.' in span:
      found.append((f'{page.relative_to(ROOT)} `{span}`', span))
  return found


COMMANDS = [pytest.param(cmd, id=where) for page in PAGES for where, cmd in _commands(page)]


def _load_config(path: str):
  return config_lib.load_file(str(ROOT / path))


def _value(text: str):
  for cast in (int, float):
    try:
      return cast(text)
    except ValueError:
      pass
  return {'true': True, 'false': False}.get(text.lower(), text)


def test_the_pages_have_examples_and_overrides():  # the parsers above found them
  assert len(PYTHON) >= 3 and len(COMMANDS) >= 3, ([p.id for p in PYTHON], COMMANDS)


@pytest.mark.parametrize('cmd', COMMANDS)
def test_config_overrides_name_real_fields(cmd):
  file = re.search(r'--config=([\w/.-]+\.py(?::\w+)?)', cmd)
  config = _load_config(file.group(1) if file else 'configs/default.py')
  overrides = re.findall(r'--config\.([\w.]+)(?:=(\S*))?', cmd)
  assert overrides, cmd
  # A section of a named component's settings (model_args, ...) holds them once resolved.
  for key, value in overrides:
    if key in ('model', 'dataset', 'schedule.durations') and value:
      config_path.set_value(key, config, value)
  config = config_lib.resolve(config)
  algorithm = dict(overrides).get('algorithm') or config.algorithm
  hparams = {}
  for key, value in overrides:
    head, _, rest = key.partition('.')
    if head == 'hparams':
      known = afl_jax.algorithms.settings(algorithm)
      assert rest in known, f'{key}: {algorithm!r} takes {sorted(known)}'
      if value:
        hparams[rest] = _value(value)
      continue
    assert head in config, f'{key}: not a config field ({cmd})'
    node = config[head]
    for part in rest.split('.') if rest else ():
      assert part in node, f'{key}: {part!r} is not a field of config.{head} ({cmd})'
      node = node[part]
  if hparams:  # the values fit together (e.g. bits needs a quantizing compressor)
    if 'num_clients' in afl_jax.algorithms.ALGORITHMS.context(algorithm):
      hparams['num_clients'] = config.num_clients
    afl_jax.algorithms.make(algorithm, **hparams)
