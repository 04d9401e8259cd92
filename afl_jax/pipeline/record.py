"""A run's identity (:func:`identity`) and its record (:func:`read`); docs/reliability.md,
"One identity" and "The run record"."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from afl_jax.errors import ResumeError
from afl_jax.pipeline import metrics_io, own_code
from afl_jax.pipeline.workdir import read_json, show

CONFIG_FILE, SUMMARY_FILE = 'config.json', 'summary.json'
# Config fields that change no number a run writes (the data files' content is digested).
FREE_FIELDS = ('data_dir', 'download', 'checkpoint_every', 'stop_after_steps', 'target_accuracy')
_DIVERGED = re.compile(r'non-finite (\S+) at server step (\d+)')


def _sha(*parts: Any) -> str:
  h = hashlib.sha256()
  for p in parts:
    if isinstance(p, np.ndarray):
      a = np.ascontiguousarray(p)
      h.update(f'{a.dtype.str}{a.shape};'.encode())
      h.update(memoryview(a).cast('B') if a.size else b'')
    else:
      h.update(p if isinstance(p, bytes) else str(p).encode())
  return h.hexdigest()


def digest_of(digests: Iterable[str]) -> str:
  """The one digest of digests (run identities, in the order given)."""
  return _sha(json.dumps(list(digests)))


def data_digest(layout: Any) -> str:
  """SHA-256 of a :class:`~afl_jax.data.ClientLayout`'s arrays."""
  names = ('x', 'y', 'index', 'offsets', 'sizes', 'test_x', 'test_y', 'unlabeled_x', 'val_x')
  return _sha(layout.num_classes, *(np.asarray(getattr(layout, n)) for n in names + ('val_y',)))


def file_digest(path: str) -> str:
  with open(path, 'rb') as f:
    return _sha(f.read())


# JAX's settings that change a run's numbers (each also set by its $JAX_... variable).
JAX_SETTINGS = tuple(
  'jax_default_prng_impl jax_threefry_partitionable jax_random_seed_offset jax_enable_x64 '
  'jax_enable_custom_prng jax_default_matmul_precision jax_numpy_dtype_promotion '
  'jax_softmax_custom_jvp jax_high_dynamic_range_gumbel jax_use_direct_linearize '
  'jax_disable_jit jax_disable_most_optimizations'.split()
)
LIBRARIES = ('jax', 'jaxlib', 'flax', 'optax', 'numpy')  # their versions are in the identity
# XLA flags that change no number: the forced device count (the engine's devices) and dumps.
_QUIET_XLA_FLAGS = ('--xla_force_host_platform_device_count', '--xla_dump')


def engine() -> dict[str, Any]:
  """The devices, platform, device kind and backend version a run computes on."""
  import jax

  device = jax.devices()[0]
  return {
    'devices': jax.device_count(),
    'platform': jax.default_backend(),
    'device_kind': device.device_kind,
    'backend': str(getattr(device.client, 'platform_version', '')),
  }


def jax_facts() -> dict[str, Any]:
  """:data:`JAX_SETTINGS` as in effect, ``$XLA_FLAGS`` and the versions of :data:`LIBRARIES`."""
  import jax

  out: dict[str, Any] = {}
  for name in JAX_SETTINGS:
    value = getattr(jax.config, name, jax.config.values.get(name))  # as in effect
    out[name] = value if isinstance(value, bool | int | float | str | None) else str(value)
  flags = os.environ.get('XLA_FLAGS', '').split()
  out['XLA_FLAGS'] = ' '.join(f for f in flags if not f.startswith(_QUIET_XLA_FLAGS))
  return out | {lib: _version(lib) for lib in LIBRARIES}


_version = functools.cache(importlib.metadata.version)


def jsonable(x: Any) -> Any:
  """``x`` as strict JSON values (a non-finite float as its name, a callable by its name)."""
  if isinstance(x, Mapping):
    return {str(k): jsonable(v) for k, v in x.items()}
  if isinstance(x, list | tuple):
    return [jsonable(v) for v in x]
  if isinstance(x, bool | np.bool_):
    return bool(x)
  if isinstance(x, int | np.integer):
    return int(x)
  if isinstance(x, float | np.floating):
    return (
      float(x) if math.isfinite(x) else ('nan' if math.isnan(x) else ('inf' if x > 0 else '-inf'))
    )
  if x is None or isinstance(x, str):
    return x
  if hasattr(x, 'to_dict'):
    return jsonable(x.to_dict())
  if callable(x):
    return (
      f'<callable {getattr(x, "__module__", "?")}.{getattr(x, "__qualname__", type(x).__name__)}>'
    )
  return repr(x)


def canonical(config: Any) -> dict[str, Any]:
  if hasattr(config, 'to_dict'):
    config = config.to_dict()
  return json.loads(json.dumps(jsonable(config), sort_keys=True, allow_nan=False))


def flatten(d: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
  """``{'a': {'b': 1}}`` -> ``{'a.b': 1}`` (lists as tuples)."""
  out: dict[str, Any] = {}
  for k, v in d.items():
    if isinstance(v, Mapping) and v:
      out.update(flatten(v, f'{prefix}{k}.'))
    else:
      out[f'{prefix}{k}'] = tuple(v) if isinstance(v, list) else v
  return out


def computed(config: Any) -> dict[str, Any]:
  """The fields a run's numbers depend on: not :data:`FREE_FIELDS`, ``sweep`` nor the trace
  file's path (its arrays are digested)."""
  out = {k: v for k, v in canonical(config).items() if k not in FREE_FIELDS + ('sweep',)}
  if isinstance(out.get('schedule'), dict):
    out['schedule'] = {k: v for k, v in out['schedule'].items() if k != 'trace'}
  return out


def identity(config: Any, *, data: str, schedule: str, code: Mapping[str, str], sources) -> dict:
  """``digest`` over the config, ``data``, ``schedule`` and ``code`` digests, the engine and
  :func:`jax_facts`, each kept to name what changed; ``sources`` (digests of the files read)
  beside it, not in the digest."""
  inputs = {
    'config': _sha(json.dumps(computed(config), sort_keys=True)),
    'data': data,
    'schedule': schedule,
    'code': dict(sorted(code.items())),
    'engine': engine(),
    'jax': jax_facts(),
  }
  digest = _sha(json.dumps(inputs, sort_keys=True))[:32]  # the files' arrays, not their bytes
  return {'digest': digest, **inputs, 'sources': dict(sorted(sources.items()))}


def program(sim: Any) -> dict[str, Any]:
  """The plan of the program that computes a run (``replicas`` 0: a single run); two programs
  of one identity agree to float rounding only (docs/reliability.md, "One program")."""
  batched = bool(sim.batched)
  return {
    'replicas': int(sim.num_replicas) if batched else 0,
    'padded': int(sim.padded) if batched else 0,
    'layout': f'{sim.mode} over {sim.num_devices} device(s)',
    'slots': int(sim.num_slots),
    'block': int(sim.block_size),
    'by_steps': bool(sim.adaptive_steps),
    'ring': int(sim.ring_size),
    'local_steps': int(sim.max_steps),
    'report': None if sim.report_slots is None else int(sim.report_slots),
  }


def _show_program(p: Mapping[str, Any] | None) -> str:
  if not p:
    return 'an unrecorded program'
  pad = f' padded to {p["padded"]}' if p.get('padded', p['replicas']) != p['replicas'] else ''
  return f"a sweep's group of {p['replicas']} run(s){pad}" if p['replicas'] else 'a single run'


def _program_change(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
  a, b = _show_program(old), _show_program(new)
  diff = [f'{k} {(old or {}).get(k)} -> {v}' for k, v in new.items() if (old or {}).get(k) != v]
  return f'the program ({a} -> {b})' if a != b else f'the program of {b} ({", ".join(diff)})'


def binding(ident: Mapping[str, Any], prog: Mapping[str, Any]) -> str:
  return _sha(ident['digest'], json.dumps(prog, sort_keys=True))[:32]


def changes(old: Mapping[str, Any], new: Mapping[str, Any], old_config, new_config) -> str:
  out = []
  if old.get('config') != new['config']:
    a, b = flatten(computed(old_config or {})), flatten(computed(new_config))
    out += [
      f'config.{k} {json.dumps(a.get(k))} -> {json.dumps(b.get(k))}'
      for k in sorted(set(a) | set(b))
      if a.get(k) != b.get(k)
    ] or ['the resolved config']
  place = new_config.get('data_dir') or os.environ.get('AFL_JAX_DATA') or 'its default place'
  if old.get('data') != new['data']:
    out.append(f'the data (config.dataset={new_config.get("dataset")!r} read from {place})')
  if old.get('schedule') != new['schedule']:
    trace = (new_config.get('schedule') or {}).get('trace')
    out.append(f'the schedule arrays (config.schedule.trace={trace})' if trace else 'the schedule')
  code_a, code_b = old.get('code') or {}, new['code']
  out += [
    (
      f'the values {m[len(own_code.HELD) :]} holds'
      if m.startswith(own_code.HELD)
      else f'the source of module {m}'
    )
    + ('' if m in code_b else ' (no longer used)')
    for m in sorted(set(code_a) | set(code_b))
    if code_a.get(m) != code_b.get(m)
  ]
  a, b = old.get('engine') or {}, new['engine']
  out += [
    f'{k} {a[k]} -> {b[k]} ($AFL_JAX_CPU_DEVICES, $JAX_PLATFORMS)'
    for k in b
    if k in a and a[k] != b[k]
  ]
  a, b = old.get('jax'), new['jax']
  out += [
    f'{k} {json.dumps(a.get(k))} -> {json.dumps(b[k])}'
    + (f' (${k.upper()})' if k.startswith('jax_') else '')
    for k in b
    if a is not None and a.get(k) != b[k]
  ]
  return ', '.join(out) or 'its identity (written by another version of afl_jax)'


def saved(run_dir: str) -> tuple[dict, dict] | None:
  path = os.path.join(run_dir, CONFIG_FILE)
  if not os.path.lexists(path):
    return None
  config = read_json(path, strict=False)
  if not isinstance(config, dict):
    raise ResumeError(
      f'{show(path)} is not a JSON object; move it away, or choose another --workdir'
    )
  ident = config.pop('identity', None)
  return config, (ident if isinstance(ident, dict) else {})


def refuse(
  run_dir: str, ident: Mapping[str, Any], config: Any, prog: Mapping[str, Any] | None = None
) -> None:
  """ResumeError naming the input when ``run_dir`` holds another run's files (of other inputs,
  or computed by another ``prog``)."""
  found = saved(run_dir)
  if found is None:
    others = (
      [n for n in os.listdir(run_dir) if not n.startswith('.')] if os.path.isdir(run_dir) else []
    )
    others = [n for n in others if n not in (SUMMARY_FILE, 'plot.png', 'tensorboard')]
    if others:
      raise ResumeError(
        f'{show(run_dir)} holds {sorted(others)[:3]} but no {CONFIG_FILE} saying which run wrote '
        'them; a run never writes over another: move them away, or choose another --workdir'
      )
    return
  old_config, old = found
  if old.get('digest') != ident['digest']:
    what = changes(old, ident, old_config, canonical(config))
    raise ResumeError(
      f'{show(run_dir)} holds a run of other inputs: {what}; pass --noresume to delete its '
      'results and start over, or choose another --workdir'
    )
  if prog is not None and old.get('program') != prog:
    raise ResumeError(
      f'{show(run_dir)} holds a run of these inputs computed by another program: '
      f'{_program_change(old.get("program"), prog)}, whose float32 numbers may differ in the last '
      'bits; pass --noresume to delete its results and compute it again, or choose another '
      '--workdir (a grid extended or regrouped: run it into a new one)'
    )


def config_text(config: Any, ident: Mapping[str, Any], prog: Mapping[str, Any]) -> str:
  """``config.json``: the resolved config, its identity and its program."""
  ident = dict(ident) | {'program': dict(prog)}
  return json.dumps(canonical(config) | {'identity': ident}, indent=1, sort_keys=True) + '\n'


def status(records: Sequence[Mapping[str, Any]], num_steps: int) -> str:
  """``completed``, ``diverged at step S`` or ``stopped at step S`` (``not started``)."""
  if not records:
    return 'not started'
  stop = next((r['stopped'] for r in records if r.get('stopped')), None)
  if stop is not None:
    m = _DIVERGED.search(stop)
    return f'diverged at step {m[2] if m else records[-1]["step"]}'
  last = int(records[-1]['step'])
  return 'completed' if last >= num_steps else f'stopped at step {last}'


@dataclasses.dataclass(frozen=True)
class RunRecord:
  """One run folder; ``source``: the folder it was read from (a sweep's, or its own)."""

  path: str
  config: dict[str, Any]
  identity: dict[str, Any]
  records: list[dict]
  status: str
  source: str = ''

  @property
  def seed(self) -> int | None:
    return self.config.get('seed')

  @property
  def steps(self) -> int:
    return int(self.records[-1]['step']) if self.records else 0

  @property
  def completed(self) -> bool:
    return self.status == 'completed'

  def summary(self) -> dict[str, Any]:
    """``summary.json``: status, identity, seed and final metrics (null for a diverged run)."""
    out = {
      'status': self.status,
      'identity': self.identity.get('digest'),
      'data_sha256': self.identity.get('data'),
      'seed': self.seed,
      'algorithm': self.config.get('algorithm'),
      **final(self.records, float(self.config.get('target_accuracy') or 0.0)),
    }
    if self.status.startswith('diverged'):
      out |= {k: None for k in out if k.endswith(('accuracy', 'loss')) and k != 'target_accuracy'}
    return out


def read(run_dir: str) -> RunRecord:
  config, ident = saved(run_dir) or ({}, {})
  records = metrics_io.read_metrics(run_dir)
  rounds = int(config.get('num_rounds') or (records[-1]['step'] if records else 0))
  return RunRecord(run_dir, config, ident, records, status(records, rounds), run_dir)


def final(records: Sequence[Mapping[str, Any]], target: float = 0.0) -> dict[str, Any]:
  """The last record, best validation accuracy and, for ``target`` > 0, when it was reached."""
  if not records:
    return {'steps': 0}
  last = records[-1]
  out = {'steps': last['step'], 'wall_clock': last['wall_clock'], 'bytes_up': last['bytes_up']}
  out |= {'bytes_down': last.get('bytes_down')}
  out |= {k: v for k, v in last.items() if k.endswith(('accuracy', 'loss'))}
  vals = [r['val_accuracy'] for r in records if isinstance(r.get('val_accuracy'), float)]
  if vals and all(math.isfinite(v) for v in vals):
    out['best_val_accuracy'] = max(vals)
  if target > 0:
    hit = metrics_io.first_reaching(records, target)
    out['target_accuracy'] = target
    for key, col in (('steps', 'step'), ('wall_clock', 'wall_clock'), ('bytes_up', 'bytes_up')):
      out[f'{key}_to_target'] = hit[col] if hit else None
  return out
