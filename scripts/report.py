"""Rebuild the result pages from the committed per-run records, or check them.

  python scripts/report.py                 # print the tally; say which pages are stale
  python scripts/report.py --write         # rewrite docs/results/<paper>.md, plots, README.md

Every number on a page comes from docs/results/records/<paper>.csv.gz and the
declarations in configs/repro/; nothing is written unless --write is given.
"""

import os
import pathlib

from absl import flags

from afl_jax.pipeline import cache

cache.use_checkout(__file__)  # configs/ and docs/ of this checkout, before reproduction loads

from afl_jax import reproduction  # noqa: E402
from afl_jax.pipeline import cli  # noqa: E402
from afl_jax.reproduction import pages  # noqa: E402

_PAPERS = flags.DEFINE_list(
  'papers', list(reproduction.PAPERS), 'Papers whose plots to redraw (every page is rebuilt).'
)
_WRITE = flags.DEFINE_bool('write', False, 'Write the pages (default: only check and print).')
_PLOTS = flags.DEFINE_bool('plots', True, 'With --write: redraw the plots too.')
flags.register_validator(
  'papers',
  lambda v: set(v) <= set(reproduction.PAPERS),
  f'not among {", ".join(reproduction.PAPERS)}',
)


def main(argv):
  del argv  # cli.flags_parser refuses stray arguments
  if _WRITE.value:
    for path in pages.write(_PAPERS.value, plots=_PLOTS.value):
      print(f'wrote {path}')
    return
  scored = pages.score_all()
  stale = []
  for key in _PAPERS.value:
    text = pages.render(reproduction.load_paper(key), scored[key])
    path = os.path.join(pages.RESULTS, f'{key}.md')
    if not os.path.exists(path) or pathlib.Path(path).read_text() != text:
      stale.append(path)
  print(pages.tally(scored).to_string())
  print('stale pages (rebuild with --write): ' + (', '.join(stale) or 'none'))


if __name__ == '__main__':
  cli.run(main)
