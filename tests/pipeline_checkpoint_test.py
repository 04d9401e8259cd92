"""Checkpoints: fingerprint refusal, num_rounds extension, damaged-step fallback, manifests."""

import json
import os

import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import pytest

from afl_jax import schedules
from afl_jax.errors import ResumeError
from afl_jax.pipeline import checkpoint


def config(**overrides):
  c = ml_collections.ConfigDict(
    {
      'seed': 0,
      'num_rounds': 12,
      'dtype': 'float32',
      'eval_every': 4,
      'checkpoint_every': 4,
      'hparams': {'client_lr': 0.1, 'server_lr': 1.0},
      'schedule': {'kind': 'fedbuff', 'concurrency': 4, 'buffer_size': 2},
    }
  )
  for k, v in overrides.items():
    node = c
    *path, last = k.split('.')
    for p in path:
      node = node[p]
    node[last] = v
  return c


def fedbuff(t, seed=0):
  return schedules.fedbuff(8, 4, 2, t, seed=seed)


def state(step):
  """A SimState-like pytree whose values depend on the step."""
  return {
    'step': np.int32(step),
    'params': {'w': np.full((3, 2), step, np.float32), 'b': np.arange(2.0) + step},
    'ring': np.zeros((4, 5), np.float32) + step,
  }


def host(step):
  return {'bits_up': np.float64(10.0 * step), 'arrivals': np.float64(step)}


def run(workdir, cfg, sched, steps, **kwargs):
  """What a loop does: check, record, save at ``steps``; returns the resume step."""
  ck = checkpoint.Checkpointer(workdir, **kwargs)
  step = ck.check_resume(cfg, sched)
  ck.record_run(cfg, sched)
  for s in steps:
    ck.save(s, state(s), host(s))
  ck.close()
  return step


def files_of(step_dir):
  return sorted(
    os.path.join(r, f) for r, _, fs in os.walk(step_dir) for f in fs if f != checkpoint.MANIFEST
  )


# ---- fingerprint --------------------------------------------------------------------------


def test_same_config_resumes_from_latest(tmp_path):
  cfg, sched = config(), fedbuff(12)
  assert run(tmp_path, cfg, sched, [4, 8]) is None
  ck = checkpoint.Checkpointer(tmp_path)
  assert ck.check_resume(config(), fedbuff(12)) == 8
  restored, h = ck.restore(8, state(0), host(0))
  np.testing.assert_array_equal(restored['params']['w'], state(8)['params']['w'])
  np.testing.assert_array_equal(restored['ring'], state(8)['ring'])
  assert h['bits_up'] == 80.0
  saved = json.loads((tmp_path / 'config.json').read_text())
  assert saved['hparams']['client_lr'] == 0.1


@pytest.mark.parametrize(
  'field, value, shown',
  [
    ('hparams.client_lr', 0.05, 'hparams.client_lr 0.1 -> 0.05'),
    ('seed', 1, 'seed 0 -> 1'),
    ('dtype', 'float64', 'dtype "float32" -> "float64"'),
    ('schedule.kind', 'synchronous', 'schedule.kind "fedbuff" -> "synchronous"'),
  ],
)
def test_different_config_is_refused_and_nothing_written(tmp_path, field, value, shown):
  run(tmp_path, config(), fedbuff(12), [4])
  before = (tmp_path / 'config.json').read_bytes()
  run_json = (tmp_path / 'checkpoints' / 'run.json').read_bytes()
  with pytest.raises(ResumeError) as info:
    checkpoint.Checkpointer(tmp_path).check_resume(config(**{field: value}), fedbuff(12))
  msg = str(info.value)
  assert shown in msg and '--noresume' in msg and '\n' not in msg
  assert (tmp_path / 'config.json').read_bytes() == before
  assert (tmp_path / 'checkpoints' / 'run.json').read_bytes() == run_json


def test_every_differing_field_is_named(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4])
  new = config(**{'seed': 3, 'hparams.server_lr': 0.5, 'hparams.momentum': 0.9})
  with pytest.raises(ResumeError) as info:
    checkpoint.Checkpointer(tmp_path).check_resume(new, fedbuff(12))
  msg = str(info.value)
  assert 'seed 0 -> 3' in msg and 'hparams.server_lr 1.0 -> 0.5' in msg
  assert 'hparams.momentum <absent> -> 0.9' in msg


def test_free_fields_may_change(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4])
  new = config(eval_every=2, checkpoint_every=2)
  new.stop_after_steps = 4  # a field the first run did not have, but a free one
  assert checkpoint.Checkpointer(tmp_path).check_resume(new, fedbuff(12)) == 4
  # A loop may declare more free fields.
  new.note = 'x'
  with pytest.raises(ResumeError, match='note'):
    checkpoint.Checkpointer(tmp_path).check_resume(new, fedbuff(12))
  ck = checkpoint.Checkpointer(tmp_path, free_fields=('note',))
  assert ck.check_resume(new, fedbuff(12)) == 4


def test_longer_prefix_stable_schedule_is_accepted(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4, 8])
  longer = fedbuff(30)  # FedBuff's event clock is prefix-stable in T
  ck = checkpoint.Checkpointer(tmp_path)
  assert ck.check_resume(config(num_rounds=30), longer) == 8
  ck.record_run(config(num_rounds=30), longer)
  run_json = json.loads((tmp_path / 'checkpoints' / 'run.json').read_text())
  assert run_json['num_steps'] == 30 and run_json['config']['num_rounds'] == 30
  # And the extension can itself be resumed.
  assert checkpoint.Checkpointer(tmp_path).check_resume(config(num_rounds=30), longer) == 8


def test_longer_schedule_with_a_different_past_is_refused(tmp_path):
  dur = schedules.durations.make('uniform', low=0.0, high=20.0)
  short = schedules.synchronous(8, 3, 12, durations=dur, seed=0)
  run(tmp_path, config(num_rounds=12), short, [4, 8])
  # Round durations are drawn after all T rounds' clients: another T, another past.
  longer = schedules.synchronous(8, 3, 30, durations=dur, seed=0)
  assert checkpoint.first_difference(short, longer, 8) is not None
  with pytest.raises(ResumeError) as info:
    checkpoint.Checkpointer(tmp_path).check_resume(config(num_rounds=30), longer)
  msg = str(info.value)
  assert 'num_rounds changes from 12 to 30' in msg and 'differs at server step' in msg
  assert 'keep num_rounds=12' in msg and '--noresume' in msg


def test_shorter_than_the_checkpoint_is_refused(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4, 8])
  with pytest.raises(ResumeError, match='fewer than the checkpointed 8'):
    checkpoint.Checkpointer(tmp_path).check_resume(config(num_rounds=6), fedbuff(6))


def test_same_config_but_different_schedule_is_refused(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4])
  with pytest.raises(ResumeError, match='schedule built from the same config differs'):
    checkpoint.Checkpointer(tmp_path).check_resume(config(), fedbuff(12, seed=5))


def test_finished_run_without_checkpoints_is_protected(tmp_path):
  ck = checkpoint.Checkpointer(tmp_path)
  ck.record_run(config(checkpoint_every=0), fedbuff(12), checkpointed=False)
  (tmp_path / 'metrics.jsonl').write_text('{"step": 0}\n')
  assert checkpoint.Checkpointer(tmp_path).check_resume(config(checkpoint_every=0), None) is None
  with pytest.raises(ResumeError, match='seed 0 -> 2'):
    checkpoint.Checkpointer(tmp_path).check_resume(config(seed=2), fedbuff(12))


def test_recorded_but_empty_run_may_be_replaced(tmp_path):
  checkpoint.Checkpointer(tmp_path).record_run(config(), fedbuff(12))  # crashed before output
  assert checkpoint.Checkpointer(tmp_path).check_resume(config(seed=2), fedbuff(12)) is None


def test_start_over_deletes_checkpoints_and_metrics(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4])
  (tmp_path / 'metrics.jsonl').write_text('{"step": 0}\n')
  (tmp_path / 'tensorboard').mkdir()
  (tmp_path / 'notes.txt').write_text('mine')
  checkpoint.start_over(tmp_path)
  assert sorted(os.listdir(tmp_path)) == ['notes.txt']
  assert checkpoint.Checkpointer(tmp_path).check_resume(config(seed=9), fedbuff(12)) is None


def test_config_json_is_strict_and_canonical(tmp_path):
  c = config()
  c.bad = float('nan')
  text = checkpoint.config_json(c)
  assert 'NaN' not in text and json.loads(text)['bad'] == 'nan'
  assert checkpoint.canonical_config(c) == checkpoint.canonical_config(c.to_dict())


# ---- damaged checkpoints ------------------------------------------------------------------


def largest_file(step_dir):
  return max(files_of(step_dir), key=os.path.getsize)


def truncate(path):
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def bit_flip(path, bit=0x10):
  data = bytearray(open(path, 'rb').read())
  data[len(data) // 2] ^= bit
  open(path, 'wb').write(bytes(data))


DAMAGE = {
  'truncate': lambda d: truncate(largest_file(d)),
  'bit_flip': lambda d: bit_flip(largest_file(d)),
  'delete_file': lambda d: os.remove(largest_file(d)),
  'delete_manifest': lambda d: os.remove(os.path.join(d, checkpoint.MANIFEST)),
  'every_data_file': lambda d: [bit_flip(p) for p in files_of(d) if '/d/' in p],
}


@pytest.mark.parametrize('damage', sorted(DAMAGE))
def test_damaged_latest_falls_back_to_previous_intact(tmp_path, damage):
  run(tmp_path, config(), fedbuff(12), [4, 8])
  DAMAGE[damage](str(tmp_path / 'checkpoints' / '8'))
  warnings = []
  ck = checkpoint.Checkpointer(tmp_path, warn=warnings.append)
  assert ck.check_resume(config(), fedbuff(12)) == 4
  assert len(warnings) == 1 and 'step 8' in warnings[0] and 'damaged' in warnings[0]
  assert '\n' not in warnings[0]
  restored, h = ck.restore(4, state(0), host(0))
  np.testing.assert_array_equal(restored['params']['b'], state(4)['params']['b'])
  assert h['arrivals'] == 4.0
  assert (tmp_path / 'damaged_checkpoints' / '8').is_dir()  # moved aside, not deleted
  ck.save(8, state(8), host(8))  # the run goes on and saves step 8 again
  assert checkpoint.Checkpointer(tmp_path).check_resume(config(), fedbuff(12)) == 8


def test_orbax_alone_misses_a_bit_flip_in_tensor_data(tmp_path):
  """Why the manifest exists: orbax restores flipped tensor bytes without complaint."""
  run(tmp_path, config(), fedbuff(12), [4])
  step_dir = tmp_path / 'checkpoints' / '4'
  data_files = [p for p in files_of(step_dir) if '/d/' in p]
  before = os.path.getsize(data_files[0])
  bit_flip(data_files[0])
  assert os.path.getsize(data_files[0]) == before
  assert 'checksum' in checkpoint.verify_step(str(step_dir))


def test_orbax_restores_a_bit_flip_as_wrong_values(tmp_path):
  """The evidence for the manifest: orbax itself reads flipped tensor bytes back silently."""
  rng = np.random.default_rng(0)
  noise = rng.random(4096).astype(np.float32)  # incompressible: zstd stores it raw
  ck = checkpoint.Checkpointer(tmp_path)
  ck.save(4, {'noise': noise}, host(4))
  step_dir = str(tmp_path / 'checkpoints' / '4')
  bit_flip(largest_file(step_dir))
  abstract = {'sim': {'noise': noise}, 'host': host(4)}
  item = ck.manager.restore(4, args=ocp.args.StandardRestore(abstract))
  assert not np.array_equal(item['sim']['noise'], noise)  # no error, other values
  assert 'checksum' in checkpoint.verify_step(step_dir)
  ck.close()


def test_a_torn_save_is_not_a_step(tmp_path):
  """Orbax writes a step into a tmp directory and renames it when finished."""
  run(tmp_path, config(), fedbuff(12), [4, 8])
  torn = tmp_path / 'checkpoints' / '12.orbax-checkpoint-tmp-1234'
  torn.mkdir()
  (torn / 'half_written').write_bytes(b'x')
  warnings = []
  ck = checkpoint.Checkpointer(tmp_path, warn=warnings.append)
  assert ck.steps() == [4, 8]
  assert ck.check_resume(config(), fedbuff(12)) == 8 and not warnings


def test_no_intact_checkpoint_left_is_a_resume_error(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4, 8])
  for s in ('4', '8'):
    truncate(largest_file(str(tmp_path / 'checkpoints' / s)))
  warnings = []
  with pytest.raises(ResumeError, match='no intact checkpoint') as info:
    checkpoint.Checkpointer(tmp_path, warn=warnings.append).check_resume(config(), fedbuff(12))
  assert '--noresume' in str(info.value) and len(warnings) == 2


def test_restore_with_other_shapes_is_a_resume_error(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4])
  template = state(0)
  template['ring'] = np.zeros((6, 5), np.float32)  # e.g. a larger ring buffer
  with pytest.raises(ResumeError, match=r"\['ring'\].*float32\(4, 5\).*float32\(6, 5\)"):
    checkpoint.Checkpointer(tmp_path).restore(4, template, host(0))


def test_checkpoints_without_fingerprint_are_refused(tmp_path):
  ck = checkpoint.Checkpointer(tmp_path)
  ck.save(4, state(4), host(4))
  ck.close()
  with pytest.raises(ResumeError, match='no run.json'):
    checkpoint.Checkpointer(tmp_path).check_resume(config(), fedbuff(12))


def test_max_to_keep_prunes_old_steps(tmp_path):
  run(tmp_path, config(), fedbuff(12), [4, 8, 12], max_to_keep=2)
  assert checkpoint.Checkpointer(tmp_path).steps() == [8, 12]


def test_unrestorable_intact_checkpoint_is_one_resume_error(tmp_path, monkeypatch):
  run(tmp_path, config(), fedbuff(12), [4])
  ck = checkpoint.Checkpointer(tmp_path)

  def broken(*args, **kwargs):
    raise ValueError('orbax cannot read this\nsecond line')

  monkeypatch.setattr(ck.manager, 'restore', broken)
  with pytest.raises(ResumeError, match=r'step 4 .*\(orbax cannot read this\); pass --noresume'):
    ck.restore(4, state(0), host(0))


def test_callables_in_a_config_fingerprint_stably():
  def lr_schedule(step):
    return 0.1

  c = config()
  c.hparams.lr_schedule = lr_schedule
  text = checkpoint.config_json(c)
  assert '0x' not in text and 'lr_schedule' in text
