"""Tests of client partitions, the federated builder and per-client batch sampling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afl_jax.data import ArrayDataset, dirichlet, iid, make_federated, shards, steps_per_epoch
from afl_jax.pipeline import task

# 10 balanced classes of 500 samples, in a shuffled order.
LABELS = np.random.default_rng(123).permutation(np.repeat(np.arange(10), 500))

SCHEMES = {
  'iid': lambda labels, n, seed: iid(labels, n, seed),
  'dirichlet': lambda labels, n, seed: dirichlet(labels, n, 0.3, seed),
  'shards': lambda labels, n, seed: shards(labels, n, 2, seed),
}


def mean_tv_distance(labels, part, num_classes=10):
  """Mean over clients of the total-variation distance to the global label distribution."""
  q = np.bincount(labels, minlength=num_classes) / len(labels)
  tvs = []
  for rows in np.split(part.order, part.offsets[1:]):
    counts = np.bincount(labels[rows], minlength=num_classes)
    tvs.append(0.5 * np.abs(counts / counts.sum() - q).sum())
  return float(np.mean(tvs))


@pytest.mark.parametrize('scheme', sorted(SCHEMES))
def test_every_sample_assigned_exactly_once(scheme):
  part = SCHEMES[scheme](LABELS, 20, 0)
  assert part.order.dtype == np.int64
  assert part.offsets.dtype == np.int32 and part.sizes.dtype == np.int32
  np.testing.assert_array_equal(np.sort(part.order), np.arange(len(LABELS)))
  assert part.sizes.sum() == len(LABELS) and part.sizes.min() >= 1
  np.testing.assert_array_equal(part.offsets, np.cumsum(part.sizes) - part.sizes)  # contiguous


@pytest.mark.parametrize('scheme', sorted(SCHEMES))
def test_partitions_are_deterministic_in_seed(scheme):
  a, b, c = (SCHEMES[scheme](LABELS, 20, s) for s in (7, 7, 8))
  np.testing.assert_array_equal(a.order, b.order)
  np.testing.assert_array_equal(a.sizes, b.sizes)
  assert not np.array_equal(a.order, c.order)


def test_iid_sizes_are_balanced():
  part = iid(LABELS[:4999], 20, 0)
  assert part.sizes.max() - part.sizes.min() <= 1
  assert mean_tv_distance(LABELS[:4999], part) < 0.12


def test_shards_give_each_client_few_labels():
  # 40 shards of 125 samples; each class spans exactly 4 shards -> <= 2 labels per client.
  part = shards(LABELS, 20, 2, 0)
  np.testing.assert_array_equal(part.sizes, np.full(20, 250))
  for rows in np.split(part.order, part.offsets[1:]):
    assert len(np.unique(LABELS[rows])) <= 2


def test_dirichlet_skew_grows_as_alpha_shrinks():
  tv = {a: mean_tv_distance(LABELS, dirichlet(LABELS, 20, a, 0)) for a in (0.1, 0.5, 100.0)}
  assert tv[0.1] > tv[0.5] + 0.1 > tv[100.0] + 0.2, tv
  assert tv[100.0] < 0.1, tv  # Nearly iid for large alpha.


def test_dirichlet_respects_min_size():
  # With this seed the first draw has a client below 20 samples, so a redraw is needed.
  assert dirichlet(LABELS, 20, 0.1, 0, min_size=0).sizes.min() < 20
  part = dirichlet(LABELS, 20, 0.1, 0, min_size=20)
  assert part.sizes.min() >= 20
  with pytest.raises(ValueError, match='min_size=20'):
    dirichlet(LABELS[:100], 5, 0.05, 0, min_size=20, max_tries=3)


def id_dataset(n=1000, n_test=50):
  """A dataset whose input row j is the float j, so rows can be traced back to samples."""
  x = np.arange(n, dtype=np.float32)[:, None]
  y = (np.arange(n) % 10).astype(np.int32)
  return ArrayDataset(x, y, np.zeros((n_test, 1), np.float32), np.zeros(n_test, np.int32), 10)


@pytest.mark.parametrize(
  'call, match',
  [
    (lambda: iid(LABELS, 0, 0), r'num_clients=0 must be an integer >= 1'),
    (lambda: iid(LABELS, True, 0), r'num_clients=True must be an integer >= 1'),
    (lambda: iid(LABELS, 10.0, 0), r'num_clients=10.0 must be an integer >= 1'),
    (lambda: iid(LABELS[:10], 11, 0), r'num_clients=11 must be in \[1, 10\]'),
    (lambda: dirichlet(LABELS, 10, 0.0, 0), r'alpha=0.0 must be a finite number > 0'),
    (lambda: dirichlet(LABELS, 10, float('nan'), 0), r'alpha=nan must be a finite number > 0'),
    (lambda: dirichlet(LABELS, 10, '0.5', 0), r"alpha='0.5' must be a finite number > 0"),
    (lambda: dirichlet(LABELS, 600, 0.5, 0), r'num_clients=600 must be in \[1, 500\]'),
    (lambda: dirichlet(LABELS, 10, 0.5, 0, min_size=-1), r'min_size=-1 must be an integer >= 0'),
    (lambda: shards(LABELS, 10, 0, 0), r'shards_per_client=0 must be an integer >= 1'),
    (lambda: shards(LABELS, 3000, 2, 0), r'num_clients=3000 must be in \[1, 2500\]'),
    (lambda: iid(LABELS.reshape(50, 100), 2, 0), r'1-D integer array'),
    (lambda: iid(LABELS.astype(float), 2, 0), r'1-D integer array'),
    # 100 samples, 10 per client at least; 2 shards per client of 100 samples; a skew so
    # strong that some client always ends up (nearly) empty; after holding samples out.
    (lambda: dirichlet(LABELS[:100], 11, 0.5, 0), r'num_clients=11 must be in \[1, 10\]: there'),
    (lambda: shards(LABELS[:100], 51, 2, 0), r'num_clients=51 must be in \[1, 50\]'),
    (lambda: dirichlet(LABELS[:200], 20, 1e-3, 0, min_size=5, max_tries=20), 'use a larger alp'),
    (
      lambda: make_federated(id_dataset(), 'iid', 901, unlabeled_size=100),
      r'901 must be in \[1, 9',
    ),
  ],
)
def test_validation_errors_name_argument_value_and_range(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def _sample(x, y, offsets, sizes, keys, batch_size):
  """The pipeline's sampler (afl_jax.pipeline.task) on client-ordered rows, vmapped."""
  shared = {'x': x, 'y': y, 'index': jnp.arange(len(y), dtype=jnp.int32)}
  fn = jax.vmap(task.make_sample_fn(batch_size), in_axes=(None, 0, 0))
  return jax.jit(fn)(shared, {'offset': jnp.asarray(offsets), 'size': jnp.asarray(sizes)}, keys)


def test_a_batch_holds_only_the_clients_rows_under_vmap():
  sizes = np.array([1, 3, 7, 20], np.int32)
  offsets = (np.cumsum(sizes) - sizes).astype(np.int32)
  n = int(sizes.sum())
  x = jnp.arange(n, dtype=jnp.float32)[:, None] * jnp.ones((1, 2))  # row j holds j
  y = jnp.asarray(np.repeat(np.arange(4), sizes), jnp.int32)  # label = owner
  xb, yb = _sample(x, y, offsets, sizes, jax.random.split(jax.random.key(0), 4), 200)
  assert xb.shape == (4, 200, 2) and yb.shape == (4, 200)
  rows = np.asarray(xb[..., 0]).astype(int)
  for i in range(4):
    assert rows[i].min() >= offsets[i] and rows[i].max() < offsets[i] + sizes[i]
    np.testing.assert_array_equal(np.asarray(yb[i]), i)
    # With replacement: 200 draws from a client of 1, 3 or 7 rows hit every row.
    if sizes[i] <= 7:
      assert len(np.unique(rows[i])) == sizes[i]


def test_a_batch_is_uniform():
  # 7,000 draws over 7 rows: each count ~ Binomial(7000, 1/7), sd ~ 29; allow 5 sd.
  x, y = jnp.arange(20.0), jnp.zeros(20, jnp.int32)
  xb, _ = _sample(x, y, [5], [7], jax.random.key(1)[None], 7000)
  counts = np.bincount(np.asarray(xb[0]).astype(int) - 5, minlength=7)
  assert counts.shape == (7,)
  np.testing.assert_allclose(counts, 1000, atol=5 * 29)


def test_steps_per_epoch_is_ceil():
  out = steps_per_epoch(np.array([1, 100, 101, 250]), 100)
  np.testing.assert_array_equal(out, [1, 1, 2, 3])
  assert out.dtype == np.int32
  with pytest.raises(ValueError, match='batch_size=0'):
    steps_per_epoch(np.array([1]), 0)


@pytest.mark.parametrize('name', ['iid', 'dirichlet', 'shards'])
def test_unlabeled_split_is_disjoint_from_all_clients(name):
  ds = id_dataset()
  fd = make_federated(ds, name, 10, alpha=0.5, seed=3, unlabeled_size=150)
  client_ids = fd.x[:, 0].astype(int)
  unlabeled_ids = fd.unlabeled_x[:, 0].astype(int)
  assert len(unlabeled_ids) == 150 and len(client_ids) == 850
  assert not set(client_ids) & set(unlabeled_ids)
  np.testing.assert_array_equal(np.sort(np.r_[client_ids, unlabeled_ids]), np.arange(1000))
  np.testing.assert_array_equal(fd.y, ds.train_y[client_ids])  # labels stay aligned
  assert fd.sizes.sum() == 850 and fd.num_clients == 10
  np.testing.assert_array_equal(fd.offsets, np.cumsum(fd.sizes) - fd.sizes)
  assert not hasattr(fd, 'unlabeled_y')


def test_make_federated_unlabeled_size_and_validation():
  ds = id_dataset()
  assert make_federated(ds, 'iid', 4, unlabeled_size=37).unlabeled_x.shape == (37, 1)
  assert make_federated(ds, 'iid', 4).unlabeled_x.shape == (0, 1)
  for bad, match in (({}, "partition_name='bogus'"), ({'unlabeled_size': 1000}, r'\[0, 999\]')):
    with pytest.raises(ValueError, match=match):
      make_federated(ds, 'iid' if bad else 'bogus', 4, **bad)


def test_make_federated_standardizes_uint8_images():
  rng = np.random.default_rng(0)
  train_x = rng.integers(0, 256, (300, 4, 4), dtype=np.uint8)
  ds = ArrayDataset(
    train_x, rng.integers(0, 10, 300).astype(np.int32), train_x[:10], np.zeros(10, np.int32), 10
  )
  fd = make_federated(ds, 'iid', 3, seed=0)
  assert fd.x.dtype == np.float32 and fd.x.shape == (300, 4, 4)
  np.testing.assert_allclose(fd.x.mean(), 0.0, atol=1e-5)
  np.testing.assert_allclose(fd.x.std(), 1.0, rtol=1e-5)
  scaled = train_x / 255.0
  np.testing.assert_allclose(
    fd.test_x, (scaled[:10] - scaled.mean()) / scaled.std(), rtol=1e-5, atol=1e-5
  )
