"""Reproduce a paper's claims as declared in configs/repro/<paper>.py, or your own.

  python scripts/reproduce.py --paper=fedgm [--only=sync,...] [--phase=all|select|test]
  python scripts/reproduce.py --paper=/path/to/my_claims.py

Runs the selection sweeps (every grid setting on the selection seeds), then the
selected settings on the fresh test seeds, storing per-run records in
docs/results/records/<paper>.csv.gz (sweeps whose records are up to date are skipped),
then rebuilds docs/results/<paper>.md and the summary from the records.

``--paper`` may also name a declaration file of your own (a ``PAPER`` built with
``afl_jax.reproduction.spec``, anywhere on disk; docs/extending.md): its records go to
``records/`` beside the file, its page to ``<key>.md`` beside it, and its claims'
verdicts (adjusted among themselves) are printed. The configs and declarations are
found in this script's checkout (``scripts/..``), or the working directory.

Several processes (docs/distributed.md): the same command once per process with
``--num_processes=P --process_id=i --coordinator=HOST:PORT``; each sweep's replicas span
every device of every process, process 0 writes the records and pages.
"""

import os

from absl import flags

from afl_jax.pipeline import cache
from afl_jax.pipeline.devices import set_cpu_devices

cache.use_checkout(__file__)  # configs/ of this checkout, also after a regular pip install
set_cpu_devices()  # before JAX starts its backend

from afl_jax import reproduction  # noqa: E402
from afl_jax.errors import UserError  # noqa: E402
from afl_jax.pipeline import cli, processes  # noqa: E402
from afl_jax.pipeline.config import import_beside  # noqa: E402
from afl_jax.pipeline.workdir import write_text  # noqa: E402
from afl_jax.reproduction import pages, runs, scoring, spec  # noqa: E402

_PAPER = flags.DEFINE_string(
  'paper', None, f'The paper to reproduce: one of {", ".join(reproduction.PAPERS)}, or a .py file.'
)
_ONLY = flags.DEFINE_list(
  'only',
  [],
  'Run only these experiments (keys); default: every one declared to run (one declared '
  'run=False, such as a paper-length run for an accelerator, runs only when named).',
)
_PHASE = flags.DEFINE_enum('phase', 'all', ['all', 'select', 'test'], 'Which sweeps to run.')
_OUT_DIR = flags.DEFINE_string('out_dir', 'runs/repro', 'Where the sweeps write their runs.')
_RERUN = flags.DEFINE_bool('rerun', False, 'Run sweeps whose records are up to date again.')
processes.define_flags()
flags.mark_flag_as_required('paper')
flags.register_validator(
  'paper',
  lambda p: p in reproduction.PAPERS or (p.endswith('.py') and os.path.isfile(p)),
  f'must be one of {", ".join(reproduction.PAPERS)} or an existing declaration file (.py)',
)


def load_own(path: str) -> spec.Paper:
  """The ``PAPER`` of a declaration file outside the package (checked)."""
  name = os.path.splitext(os.path.basename(path))[0]
  try:
    module = import_beside(path, name)
  except Exception as e:  # noqa: BLE001 (any failure of the user's file, named by its line)
    raise UserError(f'--paper={path!r} is invalid: {cli.raised_at(e, path)}') from None
  paper = getattr(module, 'PAPER', None)
  if paper is None:
    raise UserError(f'--paper={path!r} is invalid: the file defines no PAPER') from None
  try:
    spec.check(paper)
  except ValueError as e:
    raise UserError(f'--paper={path!r} is invalid: {e}') from None
  return paper


def main(argv):
  del argv  # cli.flags_parser refuses stray arguments
  processes.start()
  own = _PAPER.value not in reproduction.PAPERS
  paper = load_own(_PAPER.value) if own else reproduction.load_paper(_PAPER.value)
  records = os.path.join(os.path.dirname(os.path.abspath(_PAPER.value)), 'records')
  records = records if own else runs.RECORDS
  os.makedirs(records, exist_ok=True)
  exps = runs.selected(paper, _ONLY.value)  # an unknown --only key: one line, nothing locked
  with runs.remembering():  # each sweep's identity built once in this command
    if _PHASE.value == 'test':
      for exp in exps:
        runs.selection_rows(paper.key, exp, records)  # refused in one line, nothing locked
    held = []  # one writer of these records at a time: process 0 of several
    processes.on_writer(lambda: held.append(runs.lock_records(records)), 'the records')
    try:
      _reproduce(paper, own, records, exps)
    finally:
      for lock in held:
        lock.release()


def _reproduce(paper: spec.Paper, own: bool, records: str, exps: list) -> None:
  cache.use_compilation_cache(_OUT_DIR.value)  # the test phase reuses the selection's programs
  # A UserError (a failed sweep) ends the script as one line (cli.run); the records of the
  # sweeps that finished are kept.
  kw = dict(rerun=_RERUN.value, records_dir=records, mark=scoring.mark)
  kw['log'] = print if processes.is_writer() else lambda *_: None  # process 0 tells
  for exp in exps:
    if _PHASE.value in ('all', 'select'):
      runs.run_phase(paper, exp, 'select', _OUT_DIR.value, **kw)
    if _PHASE.value in ('all', 'test'):
      settings = scoring.settings_to_test(paper.key, exp, records)  # on the selection
      runs.run_phase(paper, exp, 'test', _OUT_DIR.value, settings=settings, **kw)
  if not processes.is_writer():  # process 0 writes the pages
    return
  if not own:
    for path in pages.write([paper.key]):
      print(f'wrote {path}')
    return
  scored = pages.score_all(records, [paper])[paper.key]
  claims = [c for s in scored.values() for c in s['claims']]
  page = os.path.join(os.path.dirname(records), f'{paper.key}.md')
  write_text(page, pages.render(paper, scored))  # a temporary file, renamed
  print(f'wrote {page}')
  if claims:
    print(pages.claim_rows(claims).to_markdown(index=False, disable_numparse=True))


if __name__ == '__main__':
  cli.run(main)
