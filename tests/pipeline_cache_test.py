"""The scripts' process setup: the checkout their configs come from, and JAX's persistent
compilation cache (a second run of a config loads its programs instead of compiling)."""

import os

import pytest
from helper_runs import run_train

from afl_jax.pipeline import cache


def test_checkout_is_the_scripts_parent_else_the_working_directory(tmp_path, monkeypatch):
  monkeypatch.setenv(cache.CHECKOUT_ENV, '')  # so that undoing leaves it as it was
  monkeypatch.delenv(cache.CHECKOUT_ENV)
  (tmp_path / 'repo' / 'configs').mkdir(parents=True)
  script = tmp_path / 'repo' / 'scripts' / 'train.py'
  assert cache.use_checkout(str(script)) == str(tmp_path / 'repo')
  assert os.environ[cache.CHECKOUT_ENV] == str(tmp_path / 'repo')
  assert cache.use_checkout('/elsewhere/scripts/x.py') == str(tmp_path / 'repo')  # kept
  monkeypatch.delenv(cache.CHECKOUT_ENV)
  monkeypatch.chdir(tmp_path)
  assert cache.use_checkout('/elsewhere/scripts/x.py') == str(tmp_path)  # no configs/ there


def test_cache_dir_is_beside_the_workdir_unless_given(tmp_path, monkeypatch):
  monkeypatch.delenv(cache.CACHE_ENV, raising=False)
  assert cache.cache_dir(str(tmp_path / 'runs' / 'a')) == str(tmp_path / 'runs' / '.jax_cache')
  monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / 'c'))
  assert cache.cache_dir('runs/a') == str(tmp_path / 'c')


@pytest.mark.slow
def test_a_second_run_of_a_config_compiles_nothing(tmp_path):
  args = ['--config=configs/digits_smoke.py', '--config.num_rounds=4', '--config.eval_every=2']
  env = {'JAX_LOG_COMPILES': '1', cache.CACHE_ENV: str(tmp_path / 'cache')}
  rc, first = run_train(tmp_path / 'a', *args, '--verbosity=0', **env)
  assert rc == 0, first[-2000:]
  assert os.listdir(tmp_path / 'cache')
  rc, second = run_train(tmp_path / 'b', *args, '--verbosity=0', **env)
  assert rc == 0, second[-2000:]
  hits = second.count('Persistent compilation cache hit')
  assert hits > 0 and 'Persistent compilation cache hit' not in first
  # Every program the second run compiled came from the cache.
  assert hits == second.count('Finished XLA compilation of'), second[-3000:]
  a, b = (open(tmp_path / d / 'metrics.jsonl').read() for d in ('a', 'b'))
  assert a == b  # the same programs: the same run bit for bit
