"""Checkpoints of the whole simulation state with orbax.

A checkpoint holds the engine's :class:`~afl_jax.core.engine.SimState` (server and
client states, compressor residuals, the ring buffer of broadcasts and the step
counter, which is the schedule position) plus the host-side accumulators of the
run. Randomness is a function of (seed, step), so no RNG state needs saving.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp


class Checkpointer:
  """Save / restore ``{'sim': SimState, 'host': dict of arrays}`` under ``workdir/checkpoints``."""

  def __init__(self, workdir: str | os.PathLike, max_to_keep: int = 2):
    self.directory = os.path.abspath(os.path.join(workdir, 'checkpoints'))
    self.manager = ocp.CheckpointManager(
      self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep)
    )

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def save(self, step: int, sim_state: Any, host: dict[str, np.ndarray]) -> None:
    item = {'sim': sim_state, 'host': {k: np.asarray(v) for k, v in host.items()}}
    self.manager.save(step, args=ocp.args.StandardSave(item))
    self.manager.wait_until_finished()

  def restore(
    self, step: int, sim_template: Any, host_template: dict[str, np.ndarray]
  ) -> tuple[Any, dict[str, np.ndarray]]:
    template = {'sim': sim_template, 'host': {k: np.asarray(v) for k, v in host_template.items()}}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, template)
    item = self.manager.restore(step, args=ocp.args.StandardRestore(abstract))
    sim = jax.tree.unflatten(jax.tree.structure(sim_template), jax.tree.leaves(item['sim']))
    return sim, {k: np.asarray(v) for k, v in item['host'].items()}

  def close(self) -> None:
    self.manager.close()
