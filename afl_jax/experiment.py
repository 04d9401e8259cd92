"""``train_and_evaluate(config, workdir)``: the library behind ``scripts/train.py``.

Builds the data (Fashion-MNIST, digits or Synthetic), the non-IID partition, the
flax model, the schedule and the algorithm from a config; runs the engine in
chunks of ``eval_every`` server steps; evaluates between chunks; writes
``config.json``, ``schedule.npz``, ``metrics.jsonl`` (flushed at every evaluation),
``plot.png`` and ``summary.json`` into ``workdir``; checkpoints with orbax every
``checkpoint_every`` steps and resumes from the latest checkpoint when one exists.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import sys
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from afl_jax import algorithms, data, models, plotting, schedules
from afl_jax import config as config_lib
from afl_jax.checkpointing import Checkpointer
from afl_jax.core import memory, tree
from afl_jax.core.engine import Simulator
from afl_jax.core.problem import Problem


class NonFiniteError(RuntimeError):
  """Training produced NaN/inf; the metrics so far are on disk."""


# ---- building blocks ----------------------------------------------------------------
def load_dataset(c: ml_collections.ConfigDict) -> data.ArrayDataset:
  if c.dataset == 'fmnist':
    ds = data.load_fashion_mnist(c.data_dir or None, download=c.download)
  elif c.dataset == 'digits':
    ds = data.load_digits(seed=c.seed)
  else:
    raise config_lib.ConfigError(
      "config.dataset='synthetic' is built per client; use build_federated"
    )
  if c.train_subset:
    rng = np.random.default_rng(c.seed)
    keep = np.sort(
      rng.choice(len(ds.train_y), size=min(c.train_subset, len(ds.train_y)), replace=False)
    )
    ds = ds._replace(train_x=ds.train_x[keep], train_y=ds.train_y[keep])
  return ds


def build_federated(c: ml_collections.ConfigDict) -> data.FederatedData:
  if c.dataset == 'synthetic':
    return data.make_synthetic(num_clients=c.num_clients, seed=c.seed)
  ds = load_dataset(c)
  config_lib.validate(c, num_samples=len(ds.train_y) - c.unlabeled_size)
  return data.make_federated(
    ds,
    c.partition,
    c.num_clients,
    alpha=c.dirichlet_alpha,
    shards_per_client=c.shards_per_client,
    seed=c.seed,
    unlabeled_size=c.unlabeled_size,
  )


def client_local_steps(c: ml_collections.ConfigDict, fed: data.FederatedData) -> np.ndarray:
  """int32[N]: K_i (by steps, or ``local_epochs * ceil(n_i / batch_size)``)."""
  if c.local_epochs > 0:
    return c.local_epochs * data.steps_per_epoch(fed.sizes, c.batch_size)
  return np.full(fed.num_clients, c.local_steps, np.int32)


def build_schedule(
  c: ml_collections.ConfigDict, local_steps: np.ndarray, num_samples: np.ndarray | None = None
) -> schedules.Schedule:
  s = c.schedule
  seed = s.seed if s.seed >= 0 else c.seed
  speed = schedules.speed_factors(
    s.client_speed, local_steps, sigma=s.client_speed_sigma, seed=seed
  )
  dur = config_lib.make_durations(s.durations, s.durations_params, speed)
  n, t = c.num_clients, c.num_rounds
  if s.kind == 'synchronous':
    return schedules.synchronous(
      n, s.clients_per_step, t, durations=dur, local_steps=local_steps, seed=seed
    )
  if s.kind == 'fedbuff':
    return schedules.fedbuff(
      n, s.concurrency, s.buffer_size, t, durations=dur, local_steps=local_steps, seed=seed
    )
  if s.kind in ('fedecho_large', 'fedecho_mild'):  # Table 1 of FedEcho; needs client sizes
    from afl_jax.algorithms import fedecho_delays

    sizes = np.full(n, 1) if num_samples is None else num_samples
    return fedecho_delays.schedule(
      sizes,
      s.concurrency,
      s.buffer_size,
      t,
      delay=s.kind.split('_')[1],
      local_steps=local_steps,
      seed=seed,
    )
  if s.kind == 'fully_async':
    return schedules.fully_async(
      n, s.concurrency, t, durations=dur, local_steps=local_steps, seed=seed
    )
  if s.kind == 'random_staleness':
    mult = [int(v) for v in s.local_steps_multipliers.split(',') if v.strip()] or None
    return schedules.random_staleness(
      n,
      s.clients_per_step,
      t,
      window=s.window,
      local_steps=local_steps,
      local_steps_multipliers=mult,
      seed=seed,
    )
  return schedules.waiting_windows(
    n, t, window=s.wait_seconds or None, durations=dur, local_steps=local_steps, seed=seed
  )


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def build_problem(fed: data.FederatedData, apply_fn, batch_size: int, dtype) -> Problem:
  """Flat client-ordered storage; each client samples its own batch inside the step."""

  def loss_fn(params, batch):
    x, y = batch
    return cross_entropy(apply_fn(params, x), y)

  def sample_fn(shared, view, key):
    return data.sample_batch(
      shared['x'], shared['y'], view['offset'], view['size'], key, batch_size
    )

  return Problem(
    client_views={'offset': jnp.asarray(fed.offsets), 'size': jnp.asarray(fed.sizes)},
    shared={'x': jnp.asarray(fed.x, dtype), 'y': jnp.asarray(fed.y)},
    loss_fn=loss_fn,
    sample_fn=sample_fn,
    num_clients=fed.num_clients,
  )


# Names an algorithm factory may take that describe the run rather than the algorithm.
CONTEXT_NAMES = (
  'num_clients',
  'apply_fn',
  'unlabeled_x',
  'num_rounds',
  'arrivals_per_step',
  'local_steps',
)


def build_algorithm(c: ml_collections.ConfigDict, context: dict[str, Any]):
  """The registry entry ``c.algorithm`` with ``c.hparams`` plus run context it asks for."""
  hp = dict(c.hparams)
  params = inspect.signature(algorithms.registry._lookup(c.algorithm)).parameters
  for name in CONTEXT_NAMES:
    if name in params and name not in hp:
      hp[name] = context[name]
  try:
    return algorithms.get(c.algorithm, **hp)
  except ValueError as e:  # hyperparameters the factory rejects, before any compute
    raise config_lib.ConfigError(f'config.hparams for {c.algorithm!r}: {e}') from e


class Evaluator(NamedTuple):
  """Jitted evaluation of the global model."""

  fn: Any
  test: tuple
  train: tuple

  def __call__(self, params) -> dict[str, float]:
    out = self.fn(params, self.test, self.train)
    return {k: float(v) for k, v in jax.device_get(out).items()}


def make_evaluator(apply_fn, fed: data.FederatedData, c, dtype, batch: int = 1000) -> Evaluator:
  def batched(x, y):
    n = len(y)
    nb = max(1, math.ceil(n / batch))
    pad = nb * batch - n
    xs = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)]).reshape(
      (nb, batch) + x.shape[1:]
    )
    ys = np.concatenate([y, np.zeros(pad, y.dtype)]).reshape(nb, batch)
    w = np.concatenate([np.ones(n), np.zeros(pad)]).reshape(nb, batch)
    return jnp.asarray(xs, dtype), jnp.asarray(ys), jnp.asarray(w, dtype)

  rng = np.random.default_rng(c.seed + 1)
  pick = rng.choice(len(fed.y), size=min(c.eval_train_samples, len(fed.y)), replace=False)
  test = batched(fed.test_x, fed.test_y)
  train = (jnp.asarray(fed.x[pick], dtype), jnp.asarray(fed.y[pick]))

  def sums(params, xs, ys, w):
    def one(args):
      x, y, wi = args
      logits = apply_fn(params, x)
      ce = optax.softmax_cross_entropy_with_integer_labels(logits, y)
      return jnp.sum(ce * wi), jnp.sum((jnp.argmax(logits, -1) == y) * wi)

    loss, correct = jax.lax.map(one, (xs, ys, w))
    total = jnp.sum(w)
    return jnp.sum(loss) / total, jnp.sum(correct) / total

  @jax.jit
  def fn(params, test, train):
    test_loss, test_acc = sums(params, *test)
    x, y = train
    train_loss, grad = jax.value_and_grad(lambda p: cross_entropy(apply_fn(p, x), y))(params)
    return {
      'test_accuracy': test_acc,
      'test_loss': test_loss,
      'train_loss': train_loss,
      'grad_norm': tree.global_norm(grad),
    }

  return Evaluator(fn, test, train)


# ---- the run --------------------------------------------------------------------------
def _first_nonfinite(metrics: dict[str, np.ndarray]) -> tuple[int, str] | None:
  for name, values in sorted(metrics.items()):
    bad = ~np.isfinite(np.asarray(values))
    if bad.any():
      return int(np.argmax(bad)), name
  return None


def _write_json(path: str, obj: Any) -> None:
  with open(path, 'w') as f:
    json.dump(obj, f, indent=2, sort_keys=True, default=float)


def _truncate_metrics(path: str, last_step: int) -> list[dict]:
  """Keep the records up to ``last_step`` (resume after a kill)."""
  if not os.path.exists(path):
    return []
  kept = [r for r in plotting.read_metrics(os.path.dirname(path)) if r['step'] <= last_step]
  with open(path, 'w') as f:
    for r in kept:
      f.write(json.dumps(r, sort_keys=True) + '\n')
  return kept


def train_and_evaluate(
  config: ml_collections.ConfigDict, workdir: str, *, log=print
) -> dict[str, Any]:
  """Run one experiment; returns the summary (also written to ``summary.json``)."""
  c = config
  config_lib.validate(c)
  if c.dtype == 'float64':
    jax.config.update('jax_enable_x64', True)
  dtype = jnp.dtype(c.dtype)
  os.makedirs(workdir, exist_ok=True)
  fed = build_federated(c)
  model = models.get_model(c.model, fed.num_classes)
  local_steps = client_local_steps(c, fed)
  schedule = build_schedule(c, local_steps, fed.sizes)
  key = jax.random.key(c.seed)
  params0 = model.init(jax.random.fold_in(key, 1), jnp.asarray(fed.x[:1], dtype))
  params0 = jax.tree.map(lambda x: x.astype(dtype), params0)
  context = {
    'num_clients': fed.num_clients,
    'apply_fn': model.apply,
    'unlabeled_x': jnp.asarray(fed.unlabeled_x, dtype),
    'num_rounds': c.num_rounds,
    'arrivals_per_step': schedule.max_arrivals,
    'local_steps': int(np.median(local_steps)),
  }
  algorithm = build_algorithm(c, context)
  problem = build_problem(fed, model.apply, c.batch_size, dtype)
  sim = Simulator(
    algorithm,
    problem,
    schedule,
    chunk_size=c.eval_every,
    client_block_size=c.client_block_size or None,
  )
  evaluate = make_evaluator(model.apply, fed, c, dtype)

  with open(os.path.join(workdir, 'config.json'), 'w') as f:
    f.write(c.to_json_best_effort(indent=2, sort_keys=True))
  schedule.save(os.path.join(workdir, 'schedule.npz'))
  stats = schedule.stats()
  log(
    f'afl_jax: {c.algorithm} on {c.dataset} ({fed.num_clients} clients, {c.model}, '
    f'{models.count_params(params0)} params), schedule {c.schedule.kind}: T={stats["num_steps"]}'
    f', M={stats["max_arrivals"]}, tau_avg={stats["tau_avg"]:.3f}, tau_max={stats["tau_max"]}'
  )

  metrics_path = os.path.join(workdir, 'metrics.jsonl')
  host = {
    'bits_up': np.zeros((), np.float64),
    'bits_down': np.zeros((), np.float64),
    'tau_sum': np.zeros((), np.float64),
    'arrivals': np.zeros((), np.float64),
  }
  ckpt = Checkpointer(workdir) if c.checkpoint_every else None
  state = sim.init(params0, key)
  log(
    f'{memory.format_report(sim.memory)}; ring buffer {sim.ring_size} models; '
    f'{sim.num_devices} device(s)'
  )
  records: list[dict] = []
  if ckpt is not None and ckpt.latest_step() is not None:
    step = ckpt.latest_step()
    state, host = ckpt.restore(step, state, host)
    records = _truncate_metrics(metrics_path, step)
    log(f'resumed from checkpoint at server step {step}')
  elif os.path.exists(metrics_path):
    os.remove(metrics_path)
  if not records:
    records.append(
      {
        'step': 0,
        'wall_clock': 0.0,
        'bytes_up': 0.0,
        'bytes_down': 0.0,
        **evaluate(sim.params(state)),
      }
    )
    with open(metrics_path, 'a') as f:
      f.write(json.dumps(records[-1], sort_keys=True) + '\n')

  status, t_run, ran = 'completed', time.time(), 0
  start_pos = sim.position(state)
  tau = schedule.staleness
  while (pos := sim.position(state)) < schedule.num_steps:
    if c.stop_after_steps and ran >= c.stop_after_steps:
      status = 'stopped'
      break
    state, out = sim.run_chunk(state, key)
    m = {k: np.asarray(v) for k, v in out['metrics'].items()}
    n_steps = len(m['arrivals'])
    ran += n_steps
    end = pos + n_steps
    host['bits_up'] = host['bits_up'] + m['bits_up'].astype(np.float64).sum()
    host['bits_down'] = host['bits_down'] + m['bits_down'].astype(np.float64).sum()
    host['tau_sum'] = host['tau_sum'] + tau[pos:end].sum()
    host['arrivals'] = host['arrivals'] + schedule.mask[pos:end].sum()
    bad = _first_nonfinite({k: v for k, v in m.items() if k.startswith(('client/', 'server/'))})
    ev = evaluate(sim.params(state))
    if bad is None and not all(np.isfinite(v) for v in ev.values()):
      bad = (n_steps - 1, next(k for k, v in ev.items() if not np.isfinite(v)))
    record = {
      'step': end,
      'wall_clock': float(schedule.wall_clock[end - 1]),
      'bytes_up': float(host['bits_up'] / 8),
      'bytes_down': float(host['bits_down'] / 8),
      'tau_avg': float(host['tau_sum'] / max(host['arrivals'], 1)),
      'tau_max': int(tau[:end].max()),
      **{
        k.replace('/', '_'): float(np.mean(v))
        for k, v in m.items()
        if k.startswith(('client/', 'server/'))
      },
      **ev,
    }
    if bad is not None:
      status = f'non-finite {bad[1]} at server step {pos + bad[0]}'
      record['stopped'] = status
    records.append(record)
    with open(metrics_path, 'a') as f:
      f.write(json.dumps(record, sort_keys=True) + '\n')
    elapsed = time.time() - t_run
    rate = (end - start_pos) / max(elapsed, 1e-9)
    eta = (schedule.num_steps - end) / max(rate, 1e-9)
    log(
      f'step {end}/{schedule.num_steps} | test acc {ev["test_accuracy"]:.4f} | test loss '
      f'{ev["test_loss"]:.4f} | sim clock {record["wall_clock"]:.1f} | '
      f'{rate:.2f} steps/s | ETA {eta:.0f}s'
    )
    if bad is not None:
      log(f'stopping: {status}; metrics so far are in {metrics_path}')
      break
    if ckpt is not None and end % c.checkpoint_every == 0:
      ckpt.save(end, state, host)
  if ckpt is not None:
    ckpt.close()

  plotting.plot_runs(
    {c.algorithm: records}, os.path.join(workdir, 'plot.png'), title=f'{c.algorithm} on {c.dataset}'
  )
  final = records[-1]
  summary = {
    'algorithm': c.algorithm,
    'dataset': c.dataset,
    'status': status,
    'steps': final['step'],
    'test_accuracy': final.get('test_accuracy'),
    'test_loss': final.get('test_loss'),
    'wall_clock': final['wall_clock'],
    'bytes_up': final['bytes_up'],
    'bytes_down': final['bytes_down'],
    'run_seconds': time.time() - t_run,
    'schedule': stats,
    'memory_bytes': dict(sim.memory),
    'ring_buffer_models': sim.ring_size,
    'devices': sim.num_devices,
  }
  if c.target_accuracy > 0:
    hit = next((r for r in records if r.get('test_accuracy', 0) >= c.target_accuracy), None)
    summary['target_accuracy'] = c.target_accuracy
    summary['steps_to_target'] = hit['step'] if hit else None
    summary['wall_clock_to_target'] = hit['wall_clock'] if hit else None
    summary['bytes_up_to_target'] = hit['bytes_up'] if hit else None
  _write_json(os.path.join(workdir, 'summary.json'), summary)
  log(
    f'summary: {status}: {final["step"]} steps, test accuracy '
    f'{summary["test_accuracy"]:.4f}, sim clock {final["wall_clock"]:.1f}, '
    f'{final["bytes_up"] / 1e6:.1f} MB up, {summary["run_seconds"]:.1f}s'
  )
  sys.stdout.flush()
  if status.startswith('non-finite'):
    raise NonFiniteError(status)
  return summary
