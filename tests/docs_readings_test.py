"""Each paper's reading is stated once, in docs/algorithms/; docstrings cite it.

The update rules' docstrings (afl_jax/algorithms, clients, servers and the paper's
delay models in afl_jax/schedules) cite the paper's equations and point at the page
of docs/algorithms that states the reading, as ``(docs/algorithms/<page>.md,
"<section>")``. Checked here: every built-in registered algorithm names the page the
algorithm table of docs/algorithms.md gives it and cites an equation, algorithm,
section or table; every pointer names an existing page and one of its headings; no
module docstring grows into a restatement (a line budget); and no docstring repeats
a passage of a docs/algorithms page (12 words of prose in a row, titles, code and
formulas aside).
"""

import ast
import inspect
import pathlib
import re

import pytest

from afl_jax import algorithms

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs' / 'algorithms'
PACKAGES = ('algorithms', 'clients', 'servers', 'schedules')
MAX_MODULE_LINES = 25  # a module docstring: summary, citation, equations cited, pointers
REPEAT_WORDS = 12  # this many words of prose in a row, also on a page, is a restatement
POINTER = re.compile(r'\(docs/algorithms/(\w+)\.md,\s+"((?:[^"]|"(?!\)))+)"\)')
CITES = re.compile(r'\b(eqs?\.|Alg\.|Algorithms?|Sec\.|Table|Theorem)\s*\(?\d')


def _sources():
  return sorted(p for pkg in PACKAGES for p in (ROOT / 'afl_jax' / pkg).glob('*.py'))


def _docstrings(path):
  """(where, docstring) of the module and of every class and function in it."""
  tree = ast.parse(path.read_text())
  nodes = [tree] + [
    n
    for n in ast.walk(tree)
    if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
  ]
  rel = path.relative_to(ROOT)
  for node in nodes:
    doc = ast.get_docstring(node)
    if doc:
      yield f'{rel}:{getattr(node, "name", "<module>")}', doc


def _headings(page):
  return [
    ' '.join(line.lstrip('#').split())
    for line in (DOCS / f'{page}.md').read_text().splitlines()
    if line.startswith('#')
  ]


def _pages_by_algorithm():
  """name -> page, from the table of docs/algorithms.md (the independent listing)."""
  out = {}
  for line in (ROOT / 'docs' / 'algorithms.md').read_text().splitlines():
    m = re.match(r'\| (.+?) \| \[\w+\]\(algorithms/(\w+)\.md\) \|', line)
    if m:
      for name in re.findall(r'`(\w+)`', m[1]):
        out[name] = m[2]
  return out


def _prose_words(text):
  text = re.sub(r'"[^"]*"', ' ', text)  # titles and quoted sections
  text = re.sub(r'\.\. math::.*?(\n\s*\n(?=\S)|\Z)', ' ', text, flags=re.S)  # display math
  text = re.sub(r'``[^`]*``|`[^`]*`', ' ', text)  # code, inline formulas, roles
  return re.findall(r'[a-z0-9_]+', text.lower())


def test_every_builtin_algorithm_cites_its_paper_and_names_its_page():
  pages = _pages_by_algorithm()
  builtin = [
    n
    for n in algorithms.ALGORITHMS.names()
    if algorithms.ALGORITHMS._factories[n].__module__.startswith('afl_jax.algorithms.')
  ]
  assert len(builtin) >= 25 and set(builtin) <= set(pages), sorted(set(builtin) - set(pages))
  for name in builtin:
    factory = algorithms.ALGORITHMS._factories[name]
    text = (factory.__doc__ or '') + '\n' + (inspect.getmodule(factory).__doc__ or '')
    assert f'docs/algorithms/{pages[name]}.md' in text, (name, pages[name])
    assert CITES.search(text), f'{name}: no equation, algorithm, section or table cited'


def test_every_pointer_names_a_page_and_one_of_its_headings():
  found = 0
  for path in _sources():
    for where, doc in _docstrings(path):
      for page, section in POINTER.findall(doc):
        assert (DOCS / f'{page}.md').is_file(), (where, page)
        section = ' '.join(section.split())
        headings = _headings(page)
        assert any(h.startswith(section) for h in headings), (where, page, section, headings)
        found += 1
  assert found >= 30  # the rules point at their readings


@pytest.mark.parametrize('path', _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_docstrings_cite_rather_than_restate(path):
  doc = ast.get_docstring(ast.parse(path.read_text())) or ''
  rule_module = path.parent.name != 'schedules' or 'docs/algorithms/' in doc
  if rule_module:
    assert len(doc.splitlines()) <= MAX_MODULE_LINES, (
      f'{path.name}: {len(doc.splitlines())} lines; state the reading in docs/algorithms '
      'and point at it'
    )


def test_no_docstring_repeats_a_passage_of_a_docs_algorithms_page():
  n = REPEAT_WORDS
  passages = {}
  for page in sorted(DOCS.glob('*.md')):
    words = _prose_words(page.read_text())
    for i in range(len(words) - n + 1):
      passages.setdefault(tuple(words[i : i + n]), page.name)
  repeats = []
  for path in _sources():
    for where, doc in _docstrings(path):
      words = _prose_words(doc)
      for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) in passages:
          repeats.append(
            f'{where} ~ {passages[tuple(words[i : i + n])]}: {" ".join(words[i : i + n])}'
          )
          break
  assert not repeats, '\n'.join(repeats)


def test_the_checks_catch_a_restated_reading_and_a_dangling_pointer():
  # The helpers above on known inputs, so a check that silently matches nothing fails.
  page = (DOCS / 'fedfa.md').read_text()
  sentence = next(line for line in page.splitlines() if len(_prose_words(line)) >= REPEAT_WORDS)
  assert len(_prose_words(sentence)) >= REPEAT_WORDS
  assert POINTER.findall('x (docs/algorithms/masfl.md, "Readings\n  taken") y') == [
    ('masfl', 'Readings\n  taken')
  ]
  assert 'Readings taken' in _headings('masfl')
  assert not any(h.startswith('No such section') for h in _headings('masfl'))
  assert CITES.search('Alg. 1 lines 8-9') and not CITES.search('see the paper')
