"""Run a declared experiment's sweeps and keep their records. A sweep's identity (its runs'
built, nothing trained) is the one key: it reruns exactly when the records lack it, and is
current exactly when the declaration gives it now."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_collections
import pandas as pd

from afl_jax.errors import UserError
from afl_jax.pipeline import cache
from afl_jax.reproduction import records, spec
from afl_jax.reproduction.records import KEYS, METRIC_COLUMNS, RECORDS, RUN, read, write  # noqa: F401


def setting_key(hparams: Mapping[str, Any]) -> str:
  """A setting's canonical text: sorted JSON of its swept fields (tuples as lists)."""
  as_lists = {k: list(v) if isinstance(v, tuple) else v for k, v in hparams.items()}
  return json.dumps(as_lists, sort_keys=True)


def setting_of(key: str) -> dict[str, Any]:
  return json.loads(key)


def identities(config: ml_collections.ConfigDict) -> dict[str, dict[str, Any]]:
  """Each grid point's :func:`afl_jax.pipeline.build.built_identity`, by run name."""
  from afl_jax.pipeline import build, sweep

  with build.reusing_data():
    return {
      sweep.run_name(p): build.built_identity(sweep.point_config(config, p))
      for p in sweep.grid(config)
    }


# (registry generation, a sweep config's text) -> the sweep's identity, within remembering()
_IDENTITIES = cache.Scoped()


def remembering() -> contextlib.AbstractContextManager[None]:
  return _IDENTITIES.scope()


def sweep_identity(config: ml_collections.ConfigDict) -> str:
  """The digest of the identities of ``config``'s runs."""
  from afl_jax import registry

  text = (registry.GENERATION[0], config.to_json_best_effort(sort_keys=True))
  ids = lambda: records.sweep_identity(i['digest'] for i in identities(config).values())
  return _IDENTITIES.get(text, ids)


def lock_records(records_dir: str):
  from afl_jax.pipeline import workdir

  try:
    return workdir.acquire(records_dir, '--records_dir')
  except workdir.WorkdirBusyError:
    info = workdir.holder(records_dir) or {}
    who = f'pid {info.get("pid")} on host {info.get("host")}' if info else 'another process'
    raise UserError(
      f'the records in {workdir.show(records_dir)} are being written by {who}'
      f' ({info.get("command", "starting")}); run one reproduce.py or report.py --write'
      ' on them at a time'
    ) from None


def machine_info() -> str:
  import jax

  devices = ', '.join(sorted({d.device_kind for d in jax.devices()}))
  many = f' x {jax.process_count()} processes' if jax.process_count() > 1 else ''
  return (
    f'{platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores{many}, '
    f'JAX {jax.__version__} on {jax.default_backend()} ({devices})'
  )


def selected(paper: spec.Paper, only: Sequence[str] = ()) -> list[spec.Experiment]:
  """The experiments named in ``only`` (in declaration order), else those declared to run."""
  keys = [e.key for e in paper.experiments]
  unknown = sorted(set(only) - set(keys))
  if unknown:
    raise UserError(f'--only={",".join(unknown)}: not among {", ".join(keys)}')
  return [e for e in paper.experiments if (e.key in only if only else e.run)]


def sweep_configs(
  exp: spec.Experiment, method: spec.Method, phase: str, settings: Sequence[str] = ()
) -> list[tuple[str, ml_collections.ConfigDict]]:
  """(setting, sweep config) of ``method``: ``'*'`` with its grid on the selection seeds, or
  each of ``settings`` on the test seeds."""
  if phase == 'select':
    return [('*', spec.sweep_config(exp, method))]
  out = []
  for key in settings:
    c = spec.sweep_config(exp, method)
    grid = {field: [value] for field, value in setting_of(key).items()}
    c.sweep = ml_collections.ConfigDict(spec.nest({**grid, 'seed': list(exp.test_seeds)}))
    out.append((key, c))
  return out


def records_of_sweep(exp_key: str, label: str, phase: str, workdir: str, summary: Mapping):
  """(rows, last step) of a finished sweep from its run records; a run of another identity,
  or stopped before its last step (not diverged), is refused."""
  from afl_jax.pipeline import record

  rows, steps = [], set()
  for run in summary['runs']:
    rec = record.read(os.path.join(workdir, run['name']))
    if not (rec.completed or rec.status.startswith('diverged')):
      raise UserError(f'{rec.path}: {rec.status}; a record needs the finished run: rerun the sweep')
    if rec.identity.get('digest') != run['identity']:
      raise UserError(f'{rec.path}: holds a run of another identity than its sweep ran; rerun')
    steps.add(int(rec.config['num_rounds']))
    key = {'experiment': exp_key, 'method': label, 'phase': phase}
    key |= {'setting': setting_key(run['hparams']), 'seed': int(run['seed'])}
    for r in (r for r in rec.records if 'test_accuracy' in r):
      metrics = {k: r.get(k, float('nan')) for k in METRIC_COLUMNS}
      rows.append(key | {'step': int(r['step']), RUN: run['identity']} | metrics)
  if len(steps) > 1:
    raise UserError(f'{workdir}: its runs end at different steps {sorted(steps)}: one sweep, one T')
  return rows, steps.pop() if steps else 0


def run_phase(
  paper: spec.Paper,
  exp: spec.Experiment,
  phase: str,
  out_dir: str,
  *,
  settings: Mapping[str, Sequence[str]] | None = None,
  records_dir: str = RECORDS,
  rerun: bool = False,
  log: Callable[[str], None] = print,
  mark: Callable[..., list],
) -> None:
  """Run the sweeps of a phase whose identity the records lack (all with ``rerun``), each
  merged as it finishes, replacing a recorded sweep of its key sharing a seed. ``settings``:
  method -> settings to test; ``mark``: ``scoring.mark``."""
  from afl_jax.pipeline import processes
  from afl_jax.pipeline import sweep as sweep_lib

  with remembering():
    frame, manifest = read(paper.key, records_dir)
    for method in exp.methods:
      wanted = (settings or {}).get(method.label, ())
      for setting, config in sweep_configs(exp, method, phase, wanted):
        ident = sweep_identity(config)
        seeds = [int(s) for s in sweep_lib.sweep_axes(config.sweep)['seed']]
        entry = {'experiment': exp.key, 'method': method.label, 'phase': phase}
        entry['setting'] = setting
        where = f'[{exp.key}/{method.label}/{phase}]'
        old = [m for m in manifest if all(m[k] == entry[k] for k in entry)]
        old = [m for m in old if set(m['seeds']) & set(seeds)]  # a sweep of its key sharing a seed
        if not rerun and any(m['identity'] == ident for m in old):
          log(f'{where} records up to date (identity {ident})')
          continue
        for m in old:
          log(
            f"{where} its runs' inputs changed (identity {m['identity']} -> {ident}): running again"
          )
        label = ''.join(ch if ch.isalnum() or ch in '+-_.' else '_' for ch in method.label)
        workdir = os.path.join(out_dir, paper.key, exp.key, phase, label, ident[:16])
        log(f'{where} sweep {setting} -> {workdir}')
        t0 = time.time()
        summary = sweep_lib.train_sweep(config, workdir, log=log)
        seconds = round(time.time() - t0, 1)
        found, steps = records_of_sweep(exp.key, method.label, phase, workdir, summary)
        for m in old:
          frame = frame[~records.sweep_rows(frame, m)]
        frame = pd.concat([frame, pd.DataFrame(found)], ignore_index=True)
        entry |= {'identity': ident, 'seeds': seeds, 'runs': len(summary['runs']), 'steps': steps}
        entry |= {'seconds': seconds, 'machine': machine_info()}
        entry['date'] = datetime.date.today().isoformat()
        manifest = mark(paper, frame, [m for m in manifest if m not in old] + [entry], [exp.key])
        if processes.is_writer():  # every process holds the same frame; process 0 writes it
          write(paper.key, frame, manifest, records_dir)  # nothing lost
        processes.barrier('afl_jax records written')


def is_declared(exp: spec.Experiment, sweep: Mapping) -> bool:
  """Whether ``exp`` as declared now gives the recorded ``sweep`` (by identity)."""
  method = {m.label: m for m in exp.methods}.get(sweep['method'])
  if sweep['experiment'] != exp.key or method is None:
    return False
  settings = [sweep['setting']] if sweep['phase'] == 'test' else []
  configs = sweep_configs(exp, method, sweep['phase'], settings)
  return [sweep_identity(c) for _, c in configs] == [sweep['identity']]


def current(exp: spec.Experiment, frame: pd.DataFrame, manifest: Sequence[Mapping]) -> pd.DataFrame:
  """The rows of ``exp``'s ``current`` sweeps (the pages score them)."""
  mine = [m for m in manifest if m['experiment'] == exp.key]
  mine = [m for m in mine if m.get(records.STATUS) == 'current']
  for m in mine:
    seeds = exp.seeds if m['phase'] == 'select' else exp.test_seeds
    if sorted(m['seeds']) != sorted(seeds):  # the declaration changed since the marking
      raise UserError(
        f'the records mark sweep {records.label(m)} current on seeds {m["seeds"]}, where '
        f'{exp.key} declares {list(seeds)}: python scripts/report.py --write --restatus'
      )
  return records.rows_of(frame, mine)


def selection_rows(paper_key: str, exp: spec.Experiment, records_dir: str = RECORDS):
  """The rows of ``exp``'s selection sweeps as declared now; UserError while a method has none."""
  frame, manifest = read(paper_key, records_dir)
  mine = [m for m in manifest if m['experiment'] == exp.key and m['phase'] == 'select']
  mine = [m for m in mine if is_declared(exp, m)]
  missing = [m.label for m in exp.methods if m.label not in {s['method'] for s in mine}]
  if missing:
    raise UserError(
      f'--phase=test: experiment {exp.key} of {paper_key} has no selection records (as '
      f'declared now) for {", ".join(missing)}; run --phase=select (or all) first'
    )
  return records.rows_of(frame, mine)
