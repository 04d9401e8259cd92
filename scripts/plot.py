"""Compare runs and sweeps: curves averaged over seeds with 95% bands, and the table.

  python scripts/plot.py runs/fedavg runs/fedbuff --out=compare.png
  python scripts/plot.py runs/sweepA runs/sweepB --x=seconds --table --baseline=fedbuff

  python scripts/plot.py runs/sweep --table --baseline=fedbuff --at=seconds:200

Every argument is a run's workdir (holding ``metrics.jsonl``) or a sweep's (each run
in it). Runs are read through their records and grouped by method, everything but the
seed (afl_jax/results.py): each method is one curve, the mean over its completed runs
with its 95% t band, on server steps, simulated seconds or MB uploaded (``--x``).
Methods are labelled by every field in which they differ; stopped and diverged runs are
counted, never averaged. ``--table`` prints the table (markdown): final and best value,
steps, seconds and MB to ``--target``, paired differences against ``--baseline`` (on the
seeds both completed, n shown). ``--at=AXIS:BUDGET`` reads every run at a budget of
simulated seconds, MB or steps. Anything wrong ends with one ``error:`` line and nothing
is written.
"""

import math
import os

from absl import flags

from afl_jax import results
from afl_jax.pipeline import cli, plotting

_OUT = flags.DEFINE_string('out', 'compare.png', "Output PNG ('' for none).")
_METRIC = flags.DEFINE_string('metric', 'test_accuracy', 'Metric of metrics.jsonl to plot.')
_X = flags.DEFINE_enum('x', 'steps', list(results.AXES), 'The x axis: steps, seconds or MB.')
_TABLE = flags.DEFINE_bool('table', False, 'Print the table of methods (markdown).')
_BASELINE = flags.DEFINE_string('baseline', None, 'The method paired differences are against.')
_TARGET = flags.DEFINE_float(
  'target',
  None,
  'Target of --metric for steps/seconds/MB to it: reached at or above it for an accuracy, at '
  "or below it for a loss (default: the runs' target_accuracy, for an accuracy).",
)
_AT = flags.DEFINE_string(
  'at', '', "Read every run at a budget: 'seconds:200', 'mb:50' or 'steps:100' ('': at its end)."
)
flags.register_validator(
  'out',
  lambda p: (
    p == ''
    or (p.strip() and os.path.isdir(os.path.dirname(os.path.abspath(p))) and not os.path.isdir(p))
  ),
  "give a file in an existing directory, or '' for no plot",
)
flags.register_validator(
  'out',
  lambda p: plotting.image_format(p) in plotting.FORMATS,
  f'the format (the file name extension) must be one of {", ".join(plotting.FORMATS)}',
)


@flags.multi_flags_validator(['target', 'metric'])
def _check_target(f) -> bool:
  target, metric = f['target'], f['metric']
  if target is None or (metric.endswith('accuracy') and 0 < target <= 1):
    return True
  if not metric.endswith('accuracy') and math.isfinite(target):
    return True
  raise flags.ValidationError(
    f'--target={target} is invalid: must be an accuracy in (0, 1] for --metric={metric}'
    if metric.endswith('accuracy')
    else f'--target={target} is invalid: must be a finite number'
  )


def main(argv):
  paths = argv[1:]
  if not paths:
    cli.exit_error('give one or more run or sweep folders: python scripts/plot.py runs/a runs/b')
  at = results.parse_at(_AT.value)
  groups = results.methods(results.load(paths))  # damaged files: MetricsError, one line
  frame = results.table(
    groups, metric=_METRIC.value, target=_TARGET.value, baseline=_BASELINE.value, at=at
  )
  if _OUT.value:
    curves = {k: results.curves(v, _X.value, _METRIC.value, at) for k, v in groups.items()}
    try:
      plotting.plot_methods(
        curves, _OUT.value, xlabel=results.AXIS_NAMES[_X.value], metric=_METRIC.value
      )
    except OSError as e:
      cli.exit_error(f'cannot write --out={_OUT.value}: {e}')
    print(f'wrote {_OUT.value} ({len(groups)} methods)')
  if _TABLE.value:
    print(results.markdown(frame), end='')


if __name__ == '__main__':
  cli.run(main, positional='workdirs')
