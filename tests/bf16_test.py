"""bf16 client compute with float32 state (``Simulator(compute_dtype=...)``)."""

import jax
import jax.numpy as jnp
import numpy as np
from algorithm_cases import build, run_info
from helpers.sim_runs import run
from quadratic import make_quadratic, quadratic_loss, quadratic_problem, quadratic_task

import afl_jax
from afl_jax.core.precision import with_compute_dtype

N = 6
P0 = {'x': jnp.ones(4, jnp.float32)}


def _run(name, **kw):
  problem = quadratic_problem(*make_quadratic(num_clients=N))
  sched = afl_jax.schedules.fedbuff(N, 4, 3, 8, local_steps=3, seed=1)
  out, state, _ = run(build(name, run_info(N)), problem, sched, P0, **kw)
  return state, out


def test_loss_runs_in_the_compute_dtype_and_gradients_come_back_float32():
  seen = []

  def loss(params, batch):
    seen.append((params['x'].dtype, batch['a'].dtype))
    return quadratic_loss(params, batch)

  a, b = make_quadratic(num_clients=1)
  task = quadratic_task(a[0], b[0], 2, 2).replace(loss_fn=loss)
  rule = with_compute_dtype(afl_jax.clients.local_sgd(0.1), jnp.bfloat16)
  msg, _, metrics = rule.update({'x': jnp.ones(4)}, (), task, jax.random.key(0))
  assert seen and all(d == (jnp.bfloat16, jnp.bfloat16) for d in seen)
  assert msg['x'].dtype == jnp.float32 and metrics['train_loss'].dtype == jnp.float32


def test_float32_path_is_unchanged():
  """float32 as the compute dtype is the plain program (the casts vanish): bit for bit."""
  (_, ref), (_, out) = _run('fedbuff'), _run('fedbuff', compute_dtype=jnp.float32)
  for get in (lambda o: o['params']['x'], lambda o: o['metrics']['client/train_loss']):
    np.testing.assert_array_equal(get(out), get(ref))


def test_bf16_is_close_to_float32_and_state_stays_float32():
  """8 steps x 3 local steps: bf16 (8-bit mantissa) products stay within 2% of float32."""
  for name in ('fedbuff', 'masfl'):
    _, ref = _run(name)
    state, out = _run(name, compute_dtype=jnp.bfloat16)
    for leaf in jax.tree.leaves((state.server, state.clients, state.ring)):
      if jnp.issubdtype(leaf.dtype, jnp.floating):
        assert leaf.dtype == jnp.float32, name
    x, x32 = out['params']['x'], ref['params']['x']
    assert x.dtype == np.float32
    assert not np.array_equal(x, x32)  # bf16 did change the arithmetic
    err = np.abs(x - x32).max() / np.abs(x32 - 1.0).max()  # relative to how far it moved
    assert err < 2e-2, (name, err)
