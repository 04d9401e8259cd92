"""Reproduce paper fedgm as declared in configs/repro/fedgm.py; writes docs/results/fedgm.md.

  python scripts/reproduce_fedgm.py [--out_dir=runs/repro/fedgm] [--rerun] [--only=KEY,...]

The declaration holds every grid, seed and claim; scripts/report.py runs the sweeps
(finished sweeps of the same config are reused), selects on validation, and writes the
page, its plots, docs/results/fedgm.json and the summary docs/results/README.md.
"""

import report
from absl import app, flags

from afl_jax.pipeline.devices import set_cpu_devices

set_cpu_devices()  # before JAX starts its backend

_OUT_DIR = flags.DEFINE_string('out_dir', 'runs/repro/fedgm', 'Where the sweeps go.')
_RERUN = flags.DEFINE_bool('rerun', False, 'Run again even if a finished sweep exists.')
_ONLY = flags.DEFINE_list('only', [], 'Run only these experiments (keys); default: all.')


def main(argv):
  del argv
  report.main('fedgm', _OUT_DIR.value, rerun=_RERUN.value, only=tuple(_ONLY.value))


if __name__ == '__main__':
  app.run(main)
