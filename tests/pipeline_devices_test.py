"""Importing afl_jax changes no process-wide setting and loads its heavy subpackages only when
used; scripts choose the CPU device split."""

import os
import subprocess
import sys

from afl_jax.pipeline import devices


def test_import_sets_no_xla_flags_and_gives_its_subpackages_lazily():
  code = (
    'import os, sys, afl_jax; heavy = [m for m in ("afl_jax.pipeline", "afl_jax.results", '
    '"afl_jax.reproduction", "matplotlib", "pandas") if m in sys.modules]; '
    'assert not heavy, heavy; '
    'assert "fmnist" in afl_jax.data.DATASETS.names(); '
    'assert "mlp" in afl_jax.models.MODELS.names(); '
    'assert "fedbuff" in afl_jax.schedules.SCHEDULES.names(); '
    'afl_jax.compression, afl_jax.algorithms, afl_jax.pipeline.build_run, afl_jax.results.table; '
    'assert "fedgm" in afl_jax.reproduction.PAPERS; '
    'assert {"data", "pipeline"} <= set(dir(afl_jax)); print(repr(os.environ.get("XLA_FLAGS")))'
  )
  env = {k: v for k, v in os.environ.items() if k not in ('XLA_FLAGS', devices.ENV)}
  out = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=120
  )
  assert out.returncode == 0, out.stderr
  assert out.stdout.strip() == 'None'


def test_set_cpu_devices_default_override_and_respect(monkeypatch):
  monkeypatch.delenv('XLA_FLAGS', raising=False)
  monkeypatch.delenv(devices.ENV, raising=False)
  devices.set_cpu_devices()
  assert os.environ['XLA_FLAGS'] == (
    f'--xla_force_host_platform_device_count={os.cpu_count() or 1}'
  )
  monkeypatch.setenv('XLA_FLAGS', '--foo')
  monkeypatch.setenv(devices.ENV, '3')
  devices.set_cpu_devices()
  assert os.environ['XLA_FLAGS'] == '--foo --xla_force_host_platform_device_count=3'
  devices.set_cpu_devices(count=5)  # a count already set is left alone
  assert os.environ['XLA_FLAGS'] == '--foo --xla_force_host_platform_device_count=3'
