"""FedBuff + Top-k with error feedback on non-IID FMNIST: compression as a config section.

The FedBuff run of configs/fedbuff_fmnist.py (Nguyen et al., 2022; FedBuff's event
clock, Mc = 20, M = 10) whose client uploads pass through ``config.compressor``:
Top-k keeping 3% of the coordinates (AsynFLC's "top3", Yang, Hou, Wu, Sec. III-B)
with error feedback (each client adds its residual e to the next message and keeps
e <- e + Delta - C(Delta + e), frozen while absent). bytes_up in metrics.jsonl
counts values and indices exactly (afl_jax/compression/_base.py).

  python scripts/train.py --config=configs/fedbuff_topk_ef_fmnist.py --workdir=runs/fb_topk
"""

from afl_jax.pipeline import config as config_lib
from afl_jax.pipeline.config import import_beside

fedbuff = import_beside(__file__, 'fedbuff_fmnist')


def get_config():
  c = fedbuff.get_config()
  config_lib.set_algorithm(c, 'fedbuff', **c.hparams)
  c.compressor.kind = 'top_k'
  c.compressor.fraction = 0.03
  c.compressor.error_feedback = True
  return c
