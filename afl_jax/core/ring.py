"""The ring buffer of past broadcasts, planned on the host by greedy interval colouring of the
versions' lifetimes (as many slots as versions ever live at once)."""

from __future__ import annotations

import heapq
from typing import NamedTuple

import numpy as np

from afl_jax.schedules.schedule import Schedule


class RingPlan(NamedTuple):
  read_slot: np.ndarray  # int32[T, M] slot holding each arrival's start broadcast
  write_slot: np.ndarray  # int32[T + 1] slot receiving version v (v = 0 at init)
  size: int  # number of slots


def plan(schedule: Schedule) -> RingPlan:
  """Slot assignment for ``schedule`` (per-job regime)."""
  t_total = schedule.num_steps
  last = np.full(t_total + 1, -1, np.int64)  # the last step reading each version (-1: none)
  steps = np.broadcast_to(np.arange(t_total)[:, None], schedule.mask.shape)[schedule.mask]
  np.maximum.at(last, schedule.start_step[schedule.mask], steps)
  write = np.zeros(t_total + 1, np.int32)
  free: list[int] = []
  busy: list[tuple[int, int]] = []  # (last use, slot)
  size = 0
  for v in range(t_total + 1):
    # version v is written after step v - 1: slots last read at step <= v - 1 are free
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
