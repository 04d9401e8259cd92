"""Overlay several runs: accuracy vs server steps and vs simulated wall-clock.

python scripts/plot.py runs/fedavg runs/fedbuff --out=compare.png --metric=test_accuracy

Every argument must be a run's workdir (a ``metrics.jsonl`` holding ``--metric``);
anything else ends with one ``error:`` line and no plot is written.
"""

import os

from absl import flags

from afl_jax.pipeline import cli, plotting
from afl_jax.pipeline.metrics_io import METRICS_FILE

_OUT = flags.DEFINE_string('out', 'compare.png', 'Output PNG.')
_METRIC = flags.DEFINE_string('metric', 'test_accuracy', 'Metric of metrics.jsonl to plot.')
flags.register_validator(
  'out',
  lambda p: (
    p.strip() and os.path.isdir(os.path.dirname(os.path.abspath(p))) and not os.path.isdir(p)
  ),
  'give a file in an existing directory',
)


def _read(workdir: str) -> list[dict]:
  """The records of a run's workdir, or one ``error:`` line."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.isdir(workdir):
    cli.exit_error(f'{workdir} is not a directory (give the workdir of a run)')
  if not os.path.isfile(path):
    sweep = os.path.isfile(os.path.join(workdir, 'sweep.json'))
    hint = 'a sweep: give its runs, <sweep>/<run>' if sweep else 'not a run, or not started'
    cli.exit_error(f'{workdir} holds no {METRICS_FILE} ({hint})')
  records = plotting.read_metrics(workdir)  # a damaged file: MetricsError, one line
  if not any(_METRIC.value in r for r in records):
    have = sorted({k for r in records for k in r} - {'step'})
    cli.exit_error(f'--metric={_METRIC.value!r} is not in {path}; it has {have}')
  return records


def main(argv):
  workdirs = argv[1:]
  if not workdirs:
    cli.exit_error('give one or more workdirs: python scripts/plot.py runs/a runs/b --out=x.png')
  runs = {os.path.basename(os.path.normpath(w)): _read(w) for w in workdirs}
  try:
    plotting.plot_runs(runs, _OUT.value, metric=_METRIC.value)
  except OSError as e:
    cli.exit_error(f'cannot write --out={_OUT.value}: {e}')
  print(f'wrote {_OUT.value}')


if __name__ == '__main__':
  cli.run(main, positional='workdirs')
