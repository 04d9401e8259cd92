"""A run's identity beyond its config: the data it trains on, its devices, its engine plan.

Two runs of the same resolved config compute the same numbers only on the same data
(:func:`data_digest`: a SHA-256 of the arrays, wherever the files are), on the same
device count and platform (clients sharded over another count sum in another order)
and under the same engine plan (arrival slots, client blocks, grouping by local
steps). :func:`of_run` collects them; the checkpoint fingerprint ``run.json``
(afl_jax/pipeline/checkpoint.py) records them, and :func:`check` refuses a resume
that differs in one, in one line naming it. :func:`read_run` reads ``run.json``
checking the type of each field, so a hand-edited file is one line too.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from afl_jax.errors import ResumeError
from afl_jax.pipeline.workdir import read_json

_ROUNDS_FIELD = 'num_rounds'


_DATA_ARRAYS = ('x', 'y', 'index', 'offsets', 'sizes', 'test_x', 'test_y', 'unlabeled_x')
_DATA_ARRAYS += ('val_x', 'val_y')


def data_digest(layout: Any) -> str:
  """SHA-256 of the arrays a run trains and evaluates on (a :class:`~afl_jax.data.ClientLayout`:
  training samples and labels, the clients' index, test, validation and unlabeled sets).

  Hashed once per invocation from the host NumPy bytes (0.8 s for Fashion-MNIST's 220 MB
  on a 2-core CPU); two loads of the same files give the same digest wherever they are.
  """
  h = hashlib.sha256(f'num_classes={int(layout.num_classes)};'.encode())
  for name in _DATA_ARRAYS:
    a = np.ascontiguousarray(getattr(layout, name))
    h.update(f'{name}:{a.dtype.str}:{a.shape};'.encode())
    h.update(a.tobytes() if a.size == 0 else memoryview(a).cast('B'))
  return h.hexdigest()


def _get(config: Any, field: str) -> Any:
  try:
    return config[field]
  except (KeyError, AttributeError, TypeError):
    return None


def reads_num_rounds(config: Any) -> bool:
  """Does the config's algorithm take num_rounds from the run (e.g. MasFL's theory rates)?"""
  from afl_jax.algorithms import registry

  name = _get(config, 'algorithm')
  if not isinstance(name, str) or name not in registry.ALGORITHMS:
    return False  # an unknown name was refused by the config's validation already
  return 'num_rounds' in registry.context(name)


_RUN_TYPES = {
  'config': (dict,),
  'num_steps': (int,),
  'schedule_sha256': (str,),
  'checkpointed': (bool,),
  'data_sha256': (str,),
  'engine': (dict,),
}


def read_run(run_file: str) -> dict[str, Any]:
  """run.json as a dict whose fields have their types, or ResumeError naming the file."""
  advice = (
    "pass --noresume to delete this workdir's checkpoints and metrics and start over, or choose "
    'another --workdir'
  )
  try:
    run = read_json(run_file)
  except (OSError, ValueError) as e:
    raise ResumeError(f'cannot read {run_file} ({e}); {advice}') from None
  if not isinstance(run, dict):
    raise ResumeError(f'{run_file} holds a {type(run).__name__}, not a JSON object; {advice}')
  for field, types in _RUN_TYPES.items():
    v = run.get(field)
    if v is not None and (not isinstance(v, types) or (types == (int,) and isinstance(v, bool))):
      raise ResumeError(
        f'{run_file}: field {field!r} is {json.dumps(v)[:40]}, not a {types[0].__name__}; {advice}'
      )
  return run


def of_run(run: Any, sim: Any) -> dict[str, Any]:
  """The identity of a built run (afl_jax/pipeline/build.py ``Run``) under its simulator."""
  return {
    'data_sha256': data_digest(run.data),
    'num_steps': run.schedule.num_steps,
    'engine': {
      'devices': int(sim.num_devices),
      'platform': str(jax.devices()[0].platform),
      'num_slots': int(sim.num_slots),
      'block_size': int(sim.block_size),
      'adaptive_steps': bool(sim.adaptive_steps),
    },
  }


def check(
  run: Mapping[str, Any], source: str, config: Any, identity: Mapping[str, Any], workdir: str
) -> None:
  """Refuse a resume on other data, another device count or another engine plan."""
  old_data, new_data = run.get('data_sha256'), identity.get('data_sha256')
  if old_data is not None and new_data is not None and old_data != new_data:
    data_dir = _get(config, 'data_dir') or os.environ.get('AFL_JAX_DATA') or '<default>'
    raise ResumeError(
      f'config.data_dir={data_dir!r}: the dataset files there hold other data than the run '
      f'in {workdir} trained on (data digest {old_data[:12]} -> {new_data[:12]}, '
      f'{source}); point config.data_dir (or $AFL_JAX_DATA) at the files the run used, or '
      'pass --noresume to start over'
    )
  old_engine, new_engine = run.get('engine') or {}, identity.get('engine') or {}
  a, b = old_engine.get('devices'), new_engine.get('devices')
  if old_engine.get('platform', new_engine.get('platform')) != new_engine.get('platform'):
    a, b = f'{a} {old_engine["platform"]}', f'{b} {new_engine.get("platform")}'
  if a is not None and b is not None and a != b:
    raise ResumeError(
      f'the device count changes from {a} to {b} (the run in {workdir} ran on {a}; '
      '$AFL_JAX_CPU_DEVICES / XLA_FLAGS=--xla_force_host_platform_device_count on CPU): '
      'clients sharded over another count sum in another order; resume it with '
      f'{a} devices, or pass --noresume to start over'
    )
  changed = sorted(
    k
    for k in set(old_engine) & set(new_engine)
    if k not in ('devices', 'platform') and old_engine[k] != new_engine[k]
  )
  if changed:
    rounds = run.get('config', {}).get(_ROUNDS_FIELD)
    listed = ', '.join(f'{k} {old_engine[k]} -> {new_engine[k]}' for k in changed)
    raise ResumeError(
      f"config.num_rounds {rounds} -> {_get(config, _ROUNDS_FIELD)} changes the engine's plan "
      f'({listed}), so the steps already run would not be those of the longer run; keep '
      f'num_rounds={rounds}, or pass --noresume to start over'
    )
  if reads_num_rounds(config) and run.get('num_steps') not in (None, identity.get('num_steps')):
    rounds = run.get('config', {}).get(_ROUNDS_FIELD)
    raise ResumeError(
      f'config.num_rounds {rounds} -> {_get(config, _ROUNDS_FIELD)}: algorithm '
      f'{_get(config, "algorithm")!r} derives its rates from num_rounds, so the steps already '
      f'run are not those of the longer run; keep num_rounds={rounds}, or pass --noresume'
    )
