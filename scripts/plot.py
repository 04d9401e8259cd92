"""Overlay several runs: accuracy vs server steps and vs simulated wall-clock.

python scripts/plot.py runs/fedavg runs/fedbuff --out=compare.png --metric=test_accuracy
"""

import os

from absl import app, flags

from afl_jax.pipeline import plotting

_OUT = flags.DEFINE_string('out', 'compare.png', 'Output PNG.')
_METRIC = flags.DEFINE_string('metric', 'test_accuracy', 'Metric of metrics.jsonl to plot.')


def main(argv):
  workdirs = argv[1:]
  if not workdirs:
    raise app.UsageError('give one or more workdirs')
  runs = {os.path.basename(os.path.normpath(w)): plotting.read_metrics(w) for w in workdirs}
  plotting.plot_runs(runs, _OUT.value, metric=_METRIC.value)
  print(f'wrote {_OUT.value}')


if __name__ == '__main__':
  app.run(main)
