"""A diverged run says so (status, null metrics in strict JSON, exit status 1), also when
rerun; Ctrl-C during a checkpoint waits for it."""

import json
import math
import os
import signal
import time

import pytest
from helper_runs import run_train

from afl_jax.pipeline import workdir as workdir_lib

CONFIG = """
from afl_jax.pipeline import config as config_lib

def get_config(kind):
  c = config_lib.default()
  c.dataset, c.model, c.num_clients = 'digits', 'logreg', 8
  c.schedule.concurrency, c.schedule.buffer_size = 4, 2
  c.local_steps, c.batch_size = 2, 8
  config_lib.set_algorithm(c, 'fedbuff', client_lr=1e30, server_lr=1.0)
  c.num_rounds, c.eval_every, c.eval_train_samples = 6, 2, 50
  if kind == 'sweep':
    c.sweep = {'hparams': {'client_lr': [0.05, 1e30]}}
  return c
"""


def _strict(path):
  def bad(word):
    raise AssertionError(f'{path} holds {word}: not strict JSON')

  with open(path) as f:
    return json.load(f, parse_constant=bad)


@pytest.mark.parametrize('kind', ['single', 'sweep'])
def test_a_diverged_run_is_named_with_null_metrics_and_exit_status_1(tmp_path, kind):
  (tmp_path / 'cfg.py').write_text(CONFIG)
  spec = f'--config={tmp_path / "cfg.py"}:{kind}'
  rc, out = run_train(tmp_path / 'w', spec)
  last = [line for line in out.splitlines() if line.strip()][-1]
  assert rc == 1 and 'Traceback' not in out and last.startswith('stopped: '), out
  summary = _strict(tmp_path / 'w' / 'summary.json')
  if kind == 'sweep':
    assert 'sweep: 2 runs, 1 completed, 1 diverged: client_lr=1e+30 (diverged at step' in last
    ok, summary = summary['runs']
    assert ok['status'] == 'completed' and math.isfinite(ok['test_loss'])
  assert summary['status'].startswith('diverged at step '), summary
  assert all(summary[k] is None for k in summary if k.endswith(('accuracy', 'loss'))), summary
  rc2, out2 = run_train(tmp_path / 'w', spec)  # finished: nothing computed, the same end
  assert rc2 == 1 and out2.splitlines()[-1] == last and 'finished earlier' in out2, out2


def test_ctrl_c_during_a_checkpoint_waits_for_it():
  done = []
  with pytest.raises(KeyboardInterrupt):
    with workdir_lib.ctrl_c_after():
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.1)  # the handler ran meanwhile: nothing raised inside the block
      done.append('saved')
  assert done == ['saved']
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
