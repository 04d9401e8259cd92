r"""Synthetic(alpha, beta) of FedProx (Li et al., MLSys 2020, Sec. 5.1); client k, d = 60, C = 10:

.. math::

  u_k \sim N(0, \alpha),\ W_k, b_k \text{ entries} \sim N(u_k, 1),\quad
  B_k \sim N(0, \beta),\ v_k \text{ entries} \sim N(B_k, 1),\\
  x \sim N(v_k, \mathrm{diag}(j^{-1.2})),\qquad y = \arg\max_c (x W_k + b_k)_c.

``iid=True``: one shared (W, b) with N(0, 1) entries and v_k = 0. Readings, as the authors'
generator: N(0, alpha) has standard deviation alpha; sizes ``n_k = 50 + floor(LogNormal(4, 2))``
(the paper's power law) unless ``samples_per_client``; each client's samples split 80/20, the
test parts pooled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from afl_jax.data.federated import ClientLayout, grouped


def make_synthetic(
  alpha: float = 1.0,
  beta: float = 1.0,
  num_clients: int = 30,
  *,
  seed: int = 0,
  iid: bool = False,
  dim: int = 60,
  num_classes: int = 10,
  samples_per_client: Sequence[int] | None = None,
  test_fraction: float = 0.2,
) -> ClientLayout:
  if alpha < 0 or beta < 0:
    raise ValueError(f'alpha={alpha!r} and beta={beta!r} must both be >= 0')
  if num_clients < 1:
    raise ValueError(f'num_clients={num_clients!r} must be >= 1')
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f'test_fraction={test_fraction!r} must be in (0, 1)')
  rng = np.random.default_rng(seed)
  if samples_per_client is None:  # the power law: 50 + floor(LogNormal(4, 2))
    sizes = 50 + np.floor(rng.lognormal(4.0, 2.0, num_clients)).astype(np.int64)
  else:
    sizes = np.asarray(samples_per_client, dtype=np.int64)
    if sizes.shape != (num_clients,) or sizes.min() < 2:
      raise ValueError(
        f'samples_per_client must hold num_clients={num_clients} integers >= 2, got {list(sizes)}'
      )
  sigma_sqrt = np.arange(1, dim + 1, dtype=np.float64) ** (-1.2 / 2)
  if iid:
    w_shared = rng.normal(0.0, 1.0, (dim, num_classes))
    b_shared = rng.normal(0.0, 1.0, num_classes)
  train_x, train_y, test_x, test_y = [], [], [], []
  for n_k in sizes:
    if iid:
      w, b, v = w_shared, b_shared, np.zeros(dim)
    else:
      u_k = rng.normal(0.0, alpha)
      big_b_k = rng.normal(0.0, beta)
      w = rng.normal(u_k, 1.0, (dim, num_classes))
      b = rng.normal(u_k, 1.0, num_classes)
      v = rng.normal(big_b_k, 1.0, dim)
    x = v + rng.standard_normal((int(n_k), dim)) * sigma_sqrt
    y = np.argmax(x @ w + b, axis=1)
    n_test = min(max(1, int(round(test_fraction * n_k))), int(n_k) - 1)
    for out, part in zip(
      (train_x, train_y, test_x, test_y), (x[n_test:], y[n_test:], x[:n_test], y[:n_test])
    ):
      out.append(part)
  train_sizes = np.array([len(t) for t in train_y], dtype=np.int32)
  return grouped(
    x=np.concatenate(train_x).astype(np.float32),
    y=np.concatenate(train_y).astype(np.int32),
    offsets=(np.cumsum(train_sizes) - train_sizes).astype(np.int32),
    sizes=train_sizes,
    test_x=np.concatenate(test_x).astype(np.float32),
    test_y=np.concatenate(test_y).astype(np.int32),
    unlabeled_x=np.zeros((0, dim), np.float32),
    num_classes=num_classes,
  )
