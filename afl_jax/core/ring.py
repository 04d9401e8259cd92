"""Where each broadcast lives: a host-side slot plan for the ring buffer of past models.

A client's work depends only on the broadcast it started from, so the engine keeps
past broadcasts in a buffer and each arrival reads its start model from it. A
version ``v`` (the broadcast before server step v) must be kept from the moment it
is made until the last step that consumes a job started from it. Those lifetimes
are known from the schedule, so slots are assigned up front by greedy interval
colouring (optimal for intervals): the buffer holds as many models as are ever live
at once — at most min(tau_max + 1, Mc + 1) for FedBuff's clock — instead of one
per version of the staleness window. Versions nobody starts from are written to a
free slot and never read.

**Extending a run.** The jobs still running after a schedule's last step (``pending``,
:func:`pending_versions`, read off a longer schedule with the same past) are kept live
past the end. Then the slots of versions ``0..T`` depend only on the schedule's first
T steps and on which versions are still wanted at T, so the plan of T steps is the
prefix of the plan of any longer schedule extending it: a run extended from its last
checkpoint finds every start model where the longer run's plan reads it. A
checkpoint records which version each slot holds (:func:`held_versions`), and a
resume under another plan moves each slot that plan still reads to its slot there
(:func:`remap`), or names the version it lacks.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from afl_jax.schedules.schedule import Schedule


class RingPlan(NamedTuple):
  read_slot: np.ndarray  # int32[T, M] slot holding each arrival's start broadcast
  write_slot: np.ndarray  # int32[T + 1] slot receiving version v (v = 0 at init)
  size: int  # number of slots


def last_use(schedule: Schedule, pending: Sequence[int] | None = None) -> np.ndarray:
  """int64[T + 1]: the last step reading each version (-1: none; T: a pending job's)."""
  t_total = schedule.num_steps
  last = np.full(t_total + 1, -1, np.int64)
  starts = schedule.start_step[schedule.mask]
  steps = np.broadcast_to(np.arange(t_total)[:, None], schedule.mask.shape)[schedule.mask]
  np.maximum.at(last, starts, steps)
  if pending is not None and len(pending):
    last[np.asarray(pending, np.int64)] = t_total  # read after the last step
  return last


def pending_versions(longer: Schedule, num_steps: int) -> np.ndarray:
  """int64[P]: the versions ``<= num_steps`` that arrivals of ``longer`` read at its steps
  ``>= num_steps``: the jobs still running after the first ``num_steps`` steps."""
  starts = longer.start_step[num_steps:][longer.mask[num_steps:]]
  return np.unique(starts[starts <= num_steps]).astype(np.int64)


def plan(schedule: Schedule, pending: Sequence[int] | None = None) -> RingPlan:
  """Slot assignment for ``schedule`` (per-job regime); ``pending``: versions kept live
  after the last step (see the module docstring)."""
  t_total = schedule.num_steps
  last = last_use(schedule, pending)
  write = np.zeros(t_total + 1, np.int32)
  free: list[int] = []
  busy: list[tuple[int, int]] = []  # (last use, slot)
  size = 0
  for v in range(t_total + 1):
    # Version v is written after step v - 1: slots whose last reader ran at step <= v - 1
    # are free again.
    while busy and busy[0][0] <= v - 1:
      heapq.heappush(free, heapq.heappop(busy)[1])
    if free:
      slot = heapq.heappop(free)
    else:
      slot, size = size, size + 1
    write[v] = slot
    if last[v] >= 0:
      heapq.heappush(busy, (int(last[v]), slot))
    else:
      heapq.heappush(free, slot)
  read = np.where(schedule.mask, write[schedule.start_step], 0).astype(np.int32)
  return RingPlan(read, write, max(size, 1))


def held_versions(p: RingPlan, step: int) -> np.ndarray:
  """int64[size]: the version each slot holds before server step ``step`` (the state a
  checkpoint at ``step`` saves); the init writes version 0 into every slot."""
  held = np.zeros(p.size, np.int64)
  np.maximum.at(held, p.write_slot[: step + 1], np.arange(step + 1))  # the latest write
  return held


def advance(held: np.ndarray, p: RingPlan, start: int, end: int) -> np.ndarray:
  """``held`` (the version in each slot before step ``start``) after steps ``start..end-1``."""
  out = np.array(held, np.int64)
  np.maximum.at(out, p.write_slot[start + 1 : end + 1], np.arange(start + 1, end + 1))
  return out


def remap(held: np.ndarray, p: RingPlan, last: np.ndarray, step: int) -> np.ndarray | int:
  """Where a checkpoint's ring slots go under plan ``p``: int32[p.size] ``idx`` (new slot k
  takes old slot ``idx[k]``), or the first version ``p`` still reads that ``held`` lacks.

  ``held``: the version each old slot holds at ``step``; ``last``: :func:`last_use` of
  the run resumed (the reads that must find their version). A slot whose version no
  old slot holds and nobody reads takes old slot 0 (it is overwritten before any read).
  """
  where = {int(v): k for k, v in enumerate(held)}
  expect = held_versions(p, step)
  idx = np.zeros(p.size, np.int32)
  for k, v in enumerate(expect.tolist()):
    if v in where:
      idx[k] = where[v]
    elif last[v] >= step:
      return int(v)
  return idx
