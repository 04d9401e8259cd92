"""Rebuild the result pages from the committed per-run records, or check them.

  python scripts/report.py                 # print the tally (BH, Holm); say which pages are stale
  python scripts/report.py --write         # rewrite docs/results/<paper>.md, plots, README.md
  python scripts/report.py --restatus      # also say which sweeps' status the declarations change
  python scripts/report.py --write --restatus  # rewrite those statuses first, then the pages

Every number on a page comes from docs/results/records/<paper>.csv.gz and the
declarations in configs/repro/; nothing is written unless --write is given. Each
paper's records are checked against their manifest first (sweeps, seeds, runs, row
count, SHA-256, every run to its last step): a damaged or mismatched pair ends the
command with one ``error:`` line naming the file, before any page is written. The pages
score the sweeps whose stored status is ``current`` (reproduce.py sets it by identity
for the experiments it runs); ``--restatus`` compares every status with the one the
declarations give now, by identity: it builds every declared run's data and schedule
(nothing trained; minutes on 2 cores).
"""

import os
import pathlib

from absl import flags

from afl_jax.pipeline import cache
from afl_jax.pipeline.devices import set_cpu_devices

cache.use_checkout(__file__)  # configs/ and docs/ of this checkout, before reproduction loads
set_cpu_devices()  # as reproduce.py: --restatus builds identities at the records' device count

from afl_jax import reproduction  # noqa: E402
from afl_jax.errors import UserError  # noqa: E402
from afl_jax.pipeline import cli  # noqa: E402
from afl_jax.reproduction import pages, records, runs, scoring  # noqa: E402

_PAPERS = flags.DEFINE_list(
  'papers',
  list(reproduction.PAPERS),
  'Papers whose plots to redraw (every page is rebuilt; none: --papers=).',
)
_WRITE = flags.DEFINE_bool('write', False, 'Write the pages (default: only check and print).')
_RESTATUS = flags.DEFINE_bool(
  'restatus',
  False,
  "Compare each sweep's status with the declarations' by identity (minutes); with --write, "
  'rewrite the records whose statuses differ first.',
)
_RECORDS_DIR = flags.DEFINE_string(
  'records_dir', runs.RECORDS, 'The records and manifests to build from (checked first).'
)
_OUT_DIR = flags.DEFINE_string('out_dir', pages.RESULTS, 'Where the pages are (and are written).')
flags.register_validator(
  'papers',
  lambda v: set(v) <= set(reproduction.PAPERS),
  f'not among {", ".join(reproduction.PAPERS)}',
)


def _write(papers: list) -> None:
  """``--write``: with ``--restatus``, rewrite the stale statuses of ``papers``' records;
  then every page. Every pair is read and checked before anything is written."""
  for paper in papers if _RESTATUS.value else ():
    if scoring.refresh(paper, _RECORDS_DIR.value):
      print(f'wrote {records.paths(paper.key, _RECORDS_DIR.value)[0]} (status)')
  written = pages.write(_PAPERS.value, records_dir=_RECORDS_DIR.value, out_dir=_OUT_DIR.value)
  for path in written:
    print(f'wrote {path}')


def main(argv):
  del argv  # cli.flags_parser refuses stray arguments
  for flag in (_RECORDS_DIR, _OUT_DIR):
    if not os.path.isdir(flag.value):
      raise UserError(f'--{flag.name}={flag.value} is invalid: not an existing directory')
  papers = [reproduction.load_paper(key) for key in reproduction.PAPERS]
  if _WRITE.value:
    with runs.lock_records(_RECORDS_DIR.value):  # one writer of these records at a time
      _write(papers)
    return
  scored = pages.score_all(_RECORDS_DIR.value)
  stale = [  # every page and the summary, as --write rebuilds them
    path
    for path, text in pages.texts(scored, _OUT_DIR.value).items()
    if not os.path.exists(path) or pathlib.Path(path).read_text() != text
  ]
  print(pages.tally_table(scored).to_string(index=False))  # paper statements, after BH and Holm
  print('stale pages (rebuild with --write): ' + (', '.join(stale) or 'none'))
  if _RESTATUS.value:
    stale_status = {p.key: scoring.stale_status(p, _RECORDS_DIR.value) for p in papers}
    status = [f'{key} ({len(labels)} sweeps)' for key, labels in stale_status.items() if labels]
    print(
      'records with a stale status (rewrite with --write --restatus): '
      + (', '.join(status) or 'none')
    )


if __name__ == '__main__':
  cli.run(main)
