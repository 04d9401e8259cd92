"""Configs of the worked examples (docs/extending.md), outside the package.

  python <checkout>/scripts/train.py --config=my_config.py:mine --workdir=runs/mine

The config file imports the researcher's module, which registers its components:
``import_beside`` loads ``my_components.py`` from this file's folder once per process
(the config file itself may be read several times).
"""

import os

from afl_jax.pipeline import config as config_lib

HERE = os.path.dirname(os.path.abspath(__file__))
config_lib.import_beside(__file__, 'my_components')  # registers fedbuff_adam, tiny_mlp, ...

ALGORITHMS = {
  'mine': ('fedbuff_adam', {'client_lr': 0.05, 'server_lr': 0.01}),
  'clip': ('fedbuff_clip', {'client_lr': 0.05, 'max_norm': 1.0}),
  'fedbuff': ('fedbuff', {'client_lr': 0.05, 'server_lr': 1.0}),
}


def get_config(name='mine'):
  """``NAME`` (one algorithm), ``NAME_seeds`` (its sweep over 3 seeds), ``compare`` (yours
  against FedBuff over 3 seeds, one sweep: each algorithm with its own settings),
  ``compressed`` (FedBuff with your compressor) or ``budget`` (FedAsync against FedBuff on
  a trace of per-client speeds, each with its own buffer size)."""
  alg, _, seeds = name.partition('_')
  if name in ('compare', 'compressed', 'budget'):
    alg, seeds = 'fedbuff' if name != 'compare' else 'mine', ''
  c = config_lib.default()
  c.dataset, c.model = 'blobs', 'tiny_mlp'  # (c), (d)
  c.model_args.width, c.dataset_args.spread = 32, 1.0  # their own settings
  c.num_clients, c.partition = 8, 'iid'
  c.validation_size = 100  # val_accuracy, which the reproduction protocol selects on
  c.local_steps, c.batch_size = 2, 16
  c.num_rounds, c.eval_every, c.eval_train_samples = 10, 5, 200
  c.schedule.kind = 'trace'  # (e): recorded jobs, two arrivals per server step
  c.schedule.trace = os.path.join(HERE, 'jobs.csv')
  c.schedule.buffer_size = 2
  c.target_accuracy = 0.5
  name_, hparams = config_lib.entry(ALGORITHMS, alg, __file__)
  config_lib.set_algorithm(c, name_, **hparams)
  if seeds:
    c.sweep = {'seed': [0, 1, 2]}
  if name == 'compare':  # (f): an algorithm entry replaces the whole algorithm + hparams
    entries = [{'name': ALGORITHMS[k][0], **ALGORITHMS[k][1]} for k in ('fedbuff', 'mine')]
    c.sweep = {'algorithm': entries, 'seed': [0, 1, 2]}
  if name == 'compressed':  # (h): FedBuff with the compressor above
    c.compressor.kind = 'residual_sign'
  if name == 'budget':  # (i): FedAsync (M = 1) against FedBuff (M = 3), 2 of 8 clients 10x slower
    c.schedule.kind, c.schedule.trace = 'trace', os.path.join(HERE, 'speeds.csv')
    c.schedule.concurrency, c.schedule.durations = 4, 'constant'
    c.schedule.durations_params = {'value': 1.0}  # a job of client i takes duration_i seconds
    c.num_rounds, c.eval_every = 30, 3
    c.sweep = {
      'algorithm': [
        {'name': 'fedasync', 'client_lr': 0.05, 'schedule': {'buffer_size': 1}},
        {'name': 'fedbuff', 'client_lr': 0.05, 'schedule': {'buffer_size': 3}},
      ],
      'seed': [0, 1, 2],
    }
  return c
