"""A researcher's own claim, scored by the reproduction protocol (docs/extending.md).

  python <checkout>/scripts/reproduce.py --paper=my_claims.py

Records go to ``records/`` beside this file, the page to ``my_claims.md``; the claim's
verdict is printed. Methods name configs by path (``<file without .py>:<entry>``).
"""

import os

from afl_jax.reproduction import spec

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'my_config')


def setting(c):
  """The shared setting, applied after each method's own config."""
  c.num_rounds = 10


METHODS = (
  spec.Method('FedBuff', f'{CONFIG}:fedbuff', grid={'hparams.client_lr': (0.05,)}),
  spec.Method('FedBuff-Adam', f'{CONFIG}:mine', grid={'hparams.client_lr': (0.05,)}),
)
CLAIMS = (
  spec.Claim(
    'my note, Sec. 1',
    'FedBuff-Adam reaches a higher final test accuracy than FedBuff',
    'FedBuff-Adam',
    'FedBuff',
  ),
)

PAPER = spec.Paper(
  key='my_claims',
  number='own',
  citation='My note: a staleness-scaled Adam server for FedBuff',
  setting='Gaussian blobs, 8 clients, a recorded trace of 24 jobs, 10 server steps.',
  experiments=(
    spec.Experiment(
      key='adam',
      title='FedBuff with a staleness-scaled Adam server against FedBuff',
      ref='my note, Sec. 1',
      setting='my_config.py: blobs, tiny_mlp, the jobs.csv trace, 10 server steps.',
      base=setting,
      methods=METHODS,
      claims=CLAIMS,
      seeds=(0, 1, 2),
      test_seeds=tuple(range(3, 13)),
    ),
  ),
)
