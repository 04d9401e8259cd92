"""Train one algorithm from a config.

  python scripts/train.py --config=configs/fedbuff_fmnist.py --workdir=runs/fedbuff \
      --config.num_rounds=300 --config.hparams.client_lr=0.02
"""

import sys

from absl import app, flags
from ml_collections import config_flags

from afl_jax import experiment
from afl_jax.config import ConfigError
from afl_jax.data import DataError

_CONFIG = config_flags.DEFINE_config_file('config', 'configs/default.py', 'Experiment config.')
_WORKDIR = flags.DEFINE_string('workdir', 'runs/default', 'Output directory.')
_RESUME = flags.DEFINE_bool(
  'resume',
  True,
  'Continue from the latest checkpoint in workdir (needs --config.checkpoint_every > 0).',
)


def main(argv):
  del argv
  config = _CONFIG.value
  if not _RESUME.value:
    import shutil

    shutil.rmtree(f'{_WORKDIR.value}/checkpoints', ignore_errors=True)
  try:
    experiment.train_and_evaluate(config, _WORKDIR.value)
  except (ConfigError, DataError) as e:
    sys.exit(f'error: {e}')
  except experiment.NonFiniteError as e:
    sys.exit(f'stopped: {e} (metrics so far in {_WORKDIR.value}/metrics.jsonl)')


if __name__ == '__main__':
  app.run(main)
