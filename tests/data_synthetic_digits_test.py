"""Tests of the digits loader and the FedProx Synthetic(alpha, beta) generator."""

import numpy as np
import pytest
from sklearn.datasets import load_digits as sk_load_digits

from afl_jax.data import load_digits, make_synthetic


def test_digits_shapes_range_and_seeded_split():
  ds = load_digits()
  assert ds.train_x.shape == (1438, 8, 8) and ds.test_x.shape == (359, 8, 8)
  assert ds.train_x.dtype == np.float32 and ds.train_y.dtype == np.int32
  assert ds.train_x.min() == 0.0 and ds.train_x.max() == 1.0
  assert ds.num_classes == 10
  # The split is a partition of sklearn's 1,797 samples: label counts add up exactly.
  total = np.bincount(ds.train_y, minlength=10) + np.bincount(ds.test_y, minlength=10)
  np.testing.assert_array_equal(total, np.bincount(sk_load_digits().target, minlength=10))
  pixel_sums = np.sort(np.r_[ds.train_x.sum((1, 2)), ds.test_x.sum((1, 2))])
  ref = np.sort(sk_load_digits().images.sum((1, 2)) / 16.0)
  np.testing.assert_allclose(pixel_sums, ref, rtol=1e-5)
  a, b, c = load_digits(seed=1), load_digits(seed=1), load_digits(seed=2)  # seeded split
  np.testing.assert_array_equal(a.test_x, b.test_x)
  assert not np.array_equal(a.test_y, c.test_y)


def test_synthetic_layout_and_determinism():
  fd = make_synthetic(0.5, 0.5, 30, seed=4)
  assert fd.x.shape[1] == 60 and fd.x.dtype == np.float32 and fd.y.dtype == np.int32
  assert fd.num_clients == 30 and fd.num_classes == 10 and fd.unlabeled_x.shape == (0, 60)
  np.testing.assert_array_equal(fd.offsets, np.cumsum(fd.sizes) - fd.sizes)
  assert fd.sizes.sum() == len(fd.x) == len(fd.y) and fd.sizes.min() >= 40  # 80% of n_k >= 50
  assert len(fd.test_x) == len(fd.test_y) and fd.test_x.shape[1] == 60
  assert fd.y.min() >= 0 and fd.y.max() <= 9
  again = make_synthetic(0.5, 0.5, 30, seed=4)
  assert np.array_equal(fd.x, again.x) and np.array_equal(fd.y, again.y)
  assert not np.array_equal(fd.x[:10], make_synthetic(0.5, 0.5, 30, seed=5).x[:10])


def test_synthetic_explicit_sizes_and_80_20_split():
  fd = make_synthetic(1.0, 1.0, 3, samples_per_client=[10, 100, 55])
  np.testing.assert_array_equal(fd.sizes, [8, 80, 44])
  assert len(fd.test_y) == 2 + 20 + 11
  with pytest.raises(ValueError, match='samples_per_client'):
    make_synthetic(1.0, 1.0, 3, samples_per_client=[10, 100])


def test_synthetic_within_client_covariance_is_diag_j_pow_minus_1_2():
  # One client, 40,000 samples: var of feature j should be j^-1.2 (sd of the estimate
  # is var * sqrt(2/n) ~ 0.7% of var; allow 4%).
  fd = make_synthetic(1.0, 1.0, 1, samples_per_client=[40000], seed=0)
  var = np.var(np.r_[fd.x, fd.test_x], axis=0)
  np.testing.assert_allclose(var, np.arange(1, 61) ** -1.2, rtol=0.04)


def test_synthetic_beta_is_the_sd_of_client_input_means():
  # v_kj = B_k + N(0, 1), B_k ~ N(0, beta): across clients, the mean over j of a client's
  # feature means has variance beta^2 + 1/60 (+ sampling noise). 300 clients -> the
  # sample variance is within ~8% (1 sd) of the truth; allow 30%.
  def client_mean_var(beta):
    fd = make_synthetic(0.0, beta, 300, samples_per_client=[20] * 300, seed=1)
    return np.var([fd.x[fd.client_rows(i)].mean() for i in range(300)])

  np.testing.assert_allclose(client_mean_var(2.0), 4.0 + 1 / 60, rtol=0.3)
  assert client_mean_var(0.0) < 0.1


def test_synthetic_heterogeneity_iid_vs_non_iid():
  def mean_tv(fd):  # clients' total-variation distance to the pooled label distribution
    q = np.bincount(fd.y, minlength=10) / len(fd.y)
    counts = [np.bincount(fd.y[fd.client_rows(i)], minlength=10) for i in range(fd.num_clients)]
    return float(np.mean([0.5 * np.abs(c / c.sum() - q).sum() for c in counts]))

  tv_iid = mean_tv(make_synthetic(0.0, 0.0, 20, iid=True, samples_per_client=[400] * 20))
  tv_11 = mean_tv(make_synthetic(1.0, 1.0, 20, samples_per_client=[400] * 20))
  assert tv_iid < 0.15 < 0.3 < tv_11, (tv_iid, tv_11)
