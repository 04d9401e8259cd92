"""Reproduce a paper's claims as declared in configs/repro/<paper>.py.

  python scripts/reproduce.py --paper=fedgm [--only=sync,...] [--phase=all|select|test]

Runs the selection sweeps (every grid setting on the selection seeds), then the
selected settings on the fresh test seeds, storing per-run records in
docs/results/records/<paper>.csv.gz (sweeps whose records are up to date are skipped),
then rebuilds docs/results/<paper>.md and the summary from the records.
"""

from absl import flags

from afl_jax.pipeline.devices import set_cpu_devices

set_cpu_devices()  # before JAX starts its backend

from afl_jax import reproduction  # noqa: E402
from afl_jax.pipeline import cli  # noqa: E402
from afl_jax.reproduction import pages, runs, scoring  # noqa: E402

_PAPER = flags.DEFINE_enum('paper', None, reproduction.PAPERS, 'The paper to reproduce.')
_ONLY = flags.DEFINE_list(
  'only',
  [],
  'Run only these experiments (keys); default: every one declared to run (one declared '
  'run=False, such as a paper-length run for an accelerator, runs only when named).',
)
_PHASE = flags.DEFINE_enum('phase', 'all', ['all', 'select', 'test'], 'Which sweeps to run.')
_OUT_DIR = flags.DEFINE_string('out_dir', 'runs/repro', 'Where the sweeps write their runs.')
_RERUN = flags.DEFINE_bool('rerun', False, 'Run sweeps whose records are up to date again.')
flags.mark_flag_as_required('paper')


def main(argv):
  del argv  # cli.flags_parser refuses stray arguments
  paper = reproduction.load_paper(_PAPER.value)
  # A UserError (an --only key the paper does not declare, a failed sweep) ends the script
  # as one line (cli.run); the records of the sweeps that finished are kept.
  for exp in runs.selected(paper, _ONLY.value):
    if _PHASE.value in ('all', 'select'):
      runs.run_phase(paper, exp, 'select', _OUT_DIR.value, rerun=_RERUN.value)
    if _PHASE.value in ('all', 'test'):
      runs.require_selection(paper.key, exp)
      settings = scoring.settings_to_test(paper.key, exp)
      runs.run_phase(paper, exp, 'test', _OUT_DIR.value, settings=settings, rerun=_RERUN.value)
  for path in pages.write([paper.key]):
    print(f'wrote {path}')


if __name__ == '__main__':
  cli.run(main)
