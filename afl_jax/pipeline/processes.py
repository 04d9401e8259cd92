"""Several processes, one job (docs/distributed.md): flags, :func:`start`, one writer."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from absl import flags

from afl_jax.errors import ResumeError, UserError


def define_flags() -> None:
  flags.DEFINE_string(
    'coordinator',
    '',
    "host:port of process 0 of a multi-process job ('auto': detect, e.g. under SLURM; "
    "'': one process unless --num_processes > 1, then $JAX_COORDINATOR_ADDRESS).",
  )
  flags.DEFINE_integer('num_processes', 1, 'Processes of a multi-process job.')
  flags.DEFINE_integer('process_id', 0, 'This process (0 .. num_processes - 1).')
  flags.register_validator('num_processes', lambda n: n >= 1, 'must be an integer >= 1')
  flags.register_multi_flags_validator(['num_processes', 'process_id', 'coordinator'], _check)


def _check(f) -> bool:
  n, i, address = f['num_processes'], f['process_id'], f['coordinator']
  host, _, port = address.rpartition(':')
  if not 0 <= i < n:
    why = f'--process_id={i} is invalid: must be in [0, {n - 1}] (--num_processes={n})'
  elif address == '' and n > 1 and not os.environ.get('JAX_COORDINATOR_ADDRESS'):
    why = f"--coordinator='' is invalid with --num_processes={n}: give HOST:PORT of process 0"
  elif address not in ('', 'auto') and not (host and port.isdigit() and 1 <= int(port) <= 65535):
    why = f"--coordinator={address!r} is invalid: must be HOST:PORT (port 1-65535), 'auto' or ''"
  else:
    return True
  raise flags.ValidationError(why)


def start() -> None:
  """``jax.distributed.initialize`` when the flags ask for several processes."""
  address, n = flags.FLAGS.coordinator, flags.FLAGS.num_processes
  if address == '' and n == 1:
    return
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')  # CPU hosts; GPUs: NCCL
  given = {'coordinator_address': address or None, 'num_processes': n}
  given['process_id'] = flags.FLAGS.process_id
  try:
    jax.distributed.initialize(**({} if address == 'auto' else given))
  except (ValueError, RuntimeError) as e:  # no cluster detected, coordinator unreachable
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise UserError(f'jax.distributed.initialize failed: {first}') from None


def is_writer() -> bool:
  return jax.process_index() == 0


def barrier(name: str) -> None:
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


_MESSAGE_BYTES = 1 << 14


def _pack(status: int, message: bytes) -> np.ndarray:
  packed = np.zeros(_MESSAGE_BYTES + 2, np.int64)
  packed[:2] = status, len(message)
  packed[2 : 2 + len(message)] = np.frombuffer(message, np.uint8)
  return packed


def _unpack(packed: np.ndarray) -> tuple[int, str]:
  status, length = (int(v) for v in packed[:2])
  return status, bytes(packed[2 : 2 + length].astype(np.uint8)).decode(errors='replace')


def _outcome(fn: Callable[[], Any], tell: bool) -> tuple[Any, BaseException | None, int, bytes]:
  """(result, error, status, message): 1 a result, 2 a UserError, 3 too long, 4 an error."""
  try:
    result = fn()
  except Exception as e:  # noqa: BLE001 (re-raised by the caller, and told to every process)
    first = (str(e).strip().splitlines() or [''])[0]
    what = str(e) if isinstance(e, UserError) else f'{type(e).__name__}: {first}'
    return None, e, 2 if isinstance(e, UserError) else 4, what.encode()[:_MESSAGE_BYTES]
  message = json.dumps(result).encode() if tell else b''
  if len(message) > _MESSAGE_BYTES:
    return result, None, 3, f'{len(message)} bytes, above {_MESSAGE_BYTES}'.encode()
  return result, None, 1, message


def _raise(status: int, text: str, where: str) -> None:
  if status in (2, 4):
    raise (ResumeError if status == 2 else RuntimeError)(f'{text} ({where})')
  if status == 3:
    raise ValueError(f'the result of {where} has {text}')


def on_writer(fn: Callable[[], Any], name: str) -> Any:
  """``fn()`` on process 0 only; its result (JSON) or error told to every process."""
  if jax.process_count() == 1:
    return fn()
  from jax.experimental import multihost_utils

  status, message, error = 0, b'', None
  if is_writer():
    _, error, status, message = _outcome(fn, True)
  packed = np.asarray(multihost_utils.broadcast_one_to_all(_pack(status, message)))
  if error is not None:
    raise error
  status, text = _unpack(packed)
  _raise(status, text, f'process 0, {name}')
  return json.loads(text)


def agreed(fn: Callable[[], Any], name: str) -> Any:
  """``fn()`` on every process; when it fails on any, every process raises."""
  if jax.process_count() == 1:
    return fn()
  from jax.experimental import multihost_utils

  result, error, status, message = _outcome(fn, False)
  status = 0 if status == 1 else status  # a result stays on its process
  packed = multihost_utils.process_allgather(_pack(status, message if status else b''))
  packed = np.asarray(packed)
  if error is not None:
    raise error
  for i, row in enumerate(packed.reshape(jax.process_count(), -1)):
    status, text = _unpack(row)
    _raise(status, text, f'process {i}, {name}')
  return result
