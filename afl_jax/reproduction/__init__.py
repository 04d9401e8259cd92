"""Reproductions of the papers' claims: declarations, runs, per-run records, verdicts.

* :mod:`~afl_jax.reproduction.spec`: the vocabulary of ``configs/repro/<paper>.py``;
* :mod:`~afl_jax.reproduction.runs`: the selection and test sweeps, and the records;
* :mod:`~afl_jax.reproduction.scoring`: selection, claims, intervals, FDR, verdicts;
* :mod:`~afl_jax.reproduction.pages`: the pages and plots, rebuilt from the records.
"""

import os

from afl_jax.pipeline.config import import_beside
from afl_jax.reproduction import spec

PAPERS = ('masfl', 'fedfa', 'fedecho', 'fedgm', 'asynfl')  # papers 000-004


def load_paper(key: str) -> spec.Paper:
  """The declaration ``configs/repro/<key>.py``'s ``PAPER`` (checked)."""
  if key not in PAPERS:
    raise ValueError(f'paper {key!r} is not one of {", ".join(PAPERS)}.')
  paper = import_beside(os.path.join(spec.CONFIGS, 'repro', 'x.py'), key).PAPER
  spec.check(paper)
  return paper
