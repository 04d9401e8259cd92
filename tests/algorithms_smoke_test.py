"""Every registered algorithm runs end to end through train_and_evaluate (tiny digits run)."""

import math
import pathlib

import pytest

import afl_jax
from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline import loop

FMNIST_PY = pathlib.Path(__file__).parent.parent / 'configs' / 'fmnist.py'
FMNIST = config_lib.import_beside(str(FMNIST_PY), 'fmnist')  # its table of configs


def _config_for(name):
  if name in FMNIST.CONFIGS:
    c = FMNIST.get_config(name)
  else:
    c = config_lib.default()
    c.algorithm = name
    c.hparams = {k: v for k, v in c.hparams.items() if k in afl_jax.algorithms.settings(name)}
  c.dataset, c.model, c.num_clients, c.train_subset = 'digits', 'logreg', 12, 0
  c.local_steps, c.local_epochs, c.batch_size = 2, 0, 8
  c.num_rounds, c.eval_every, c.eval_train_samples = 8, 4, 100
  c.checkpoint_every, c.stop_after_steps, c.target_accuracy = 0, 0, 0.0
  c.unlabeled_size = 300 if 'unlabeled_x' in afl_jax.algorithms.ALGORITHMS.context(name) else 0
  s = c.schedule
  takes = afl_jax.schedules.settings(s.kind)  # a setting of another kind is refused
  for field, most in (('concurrency', 6), ('buffer_size', 3), ('clients_per_step', 4)):
    if field in takes:
      s[field] = min(s[field], most)
  return c


@pytest.mark.parametrize('name', afl_jax.algorithms.names())
def test_algorithm_runs_end_to_end(name, tmp_path):
  summary = loop.train_and_evaluate(_config_for(name), str(tmp_path), log=lambda *_: None)
  assert summary['status'] == 'completed' and summary['steps'] == 8
  assert math.isfinite(summary['test_accuracy'])
