"""Train one algorithm from a config.

  python scripts/train.py --config=configs/fedbuff_fmnist.py --workdir=runs/fedbuff \
      --config.num_rounds=300 --config.hparams.client_lr=0.02

A config with a ``sweep`` section runs its grid (afl_jax/pipeline/sweep.py). Any
hyperparameter the algorithm takes can be set with ``--config.hparams.NAME=VALUE``
(even when the config file does not name it). Every user error (config, command
line, data, partition, schedule, memory, resume) ends as one line
``error: config.FIELD=VALUE is invalid: ...`` with exit status 1.
"""

import sys

from afl_jax.pipeline.devices import set_cpu_devices

set_cpu_devices()

from absl import app, flags  # noqa: E402

from afl_jax.errors import UserError  # noqa: E402
from afl_jax.pipeline import cli, loop  # noqa: E402

_CONFIG = cli.define_config_flag('configs/default.py')
_WORKDIR = flags.DEFINE_string('workdir', 'runs/default', 'Output directory.')
_RESUME = flags.DEFINE_bool(
  'resume',
  True,
  'Continue from the latest checkpoint of the same run in workdir; --noresume deletes '
  "the workdir's checkpoints and metrics and starts over.",
)


def main(argv):
  del argv
  try:
    config = cli.finish_config(_CONFIG.value)
    if 'sweep' in config and len(config.sweep):  # a grid declared in the config
      from afl_jax.pipeline import sweep

      sweep.train_sweep(config, _WORKDIR.value)
    else:
      loop.train_and_evaluate(config, _WORKDIR.value, resume=_RESUME.value)
  except UserError as e:
    cli.exit_error(e)
  except loop.NonFiniteError as e:
    sys.exit(f'stopped: {e} (metrics so far in {_WORKDIR.value}/metrics.jsonl)')


if __name__ == '__main__':
  app.run(main, flags_parser=cli.flags_parser())
