"""FedFa-Delta + QSGD (4 bits per coordinate) on non-IID FMNIST.

The FedFa-Delta run of configs/fedfa_delta_fmnist.py (fully asynchronous, window K =
5, long-tailed log-normal job durations) whose client uploads are quantized by QSGD
(Alistarh et al., NeurIPS 2017): s = 2^(b-1) - 1 = 7 levels on the l2 norm,
unbiased, 32 + 4d bits per message. Set through ``config.compressor``, which wraps
any algorithm's messages.

  python scripts/train.py --config=configs/fedfa_qsgd_fmnist.py --workdir=runs/fedfa_qsgd
"""

from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline.config import import_beside

fedfa_delta = import_beside(__file__, 'fedfa_delta_fmnist')


def get_config():
  c = fedfa_delta.get_config()
  config_lib.set_algorithm(c, 'fedfa_delta', **c.hparams)
  c.compressor.kind = 'qsgd'
  c.compressor.bits = 4
  return c
