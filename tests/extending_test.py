"""docs/extending.md's worked examples (examples/extending/), run from a folder outside the
checkout against a regular (non-editable) install, with the checkout's scripts on top."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import pytest

from afl_jax import results

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, 'examples', 'extending')
SCRIPTS = os.path.join(REPO, 'scripts')


def _env(cache):
  env = {k: v for k, v in os.environ.items() if not k.startswith(('PYTHON', 'AFL_JAX_'))}
  return env | {'JAX_PLATFORMS': 'cpu', 'AFL_JAX_CACHE': str(cache)}


@pytest.fixture(scope='module')
def outside(tmp_path_factory):
  """``(python, work folder, env)``: a venv with afl_jax installed from the checkout as a
  regular install, and a copy of examples/extending/ outside the checkout."""
  tmp = tmp_path_factory.mktemp('outside')
  env = _env(tmp / 'cache')
  venv = tmp / 'venv'
  subprocess.run(
    [sys.executable, '-m', 'venv', '--system-site-packages', '--without-pip', str(venv)],
    check=True,
  )
  py = str(venv / 'bin' / 'python')
  site = subprocess.check_output(
    [py, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], text=True, env=env
  ).strip()
  pip = [py, '-m', 'pip', 'install', '--no-deps', '--no-build-isolation', '-q', REPO]
  proc = subprocess.run(pip, capture_output=True, text=True, cwd=tmp, env=env)
  if proc.returncode != 0:
    # setuptools < 70.1 (pyproject.toml allows >= 68) without the `wheel` package cannot build a
    # wheel offline: lay the package out as its wheel would (site-packages/afl_jax alone).
    assert 'bdist_wheel' in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    warnings.warn(
      'no wheel builder: afl_jax copied into the venv as its wheel lays it out', stacklevel=2
    )
    ignore = shutil.ignore_patterns('__pycache__')
    shutil.copytree(os.path.join(REPO, 'afl_jax'), os.path.join(site, 'afl_jax'), ignore=ignore)
  work = tmp / 'work'
  shutil.copytree(EXAMPLES, work, ignore=shutil.ignore_patterns('__pycache__', 'runs', 'records'))
  where = subprocess.check_output(
    [py, '-c', 'import afl_jax; print(afl_jax.__file__)'], text=True, cwd=work, env=env
  )
  assert where.startswith(site), where  # the installed copy, not the checkout
  return py, work, env


def script(outside, name, *args, ok=True):
  py, work, env = outside
  cmd = [py, os.path.join(SCRIPTS, name), *args]
  proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env, timeout=900)
  assert not ok or proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
  return proc.stdout if ok else proc


def metrics(work, run):
  with open(os.path.join(work, 'runs', run, 'metrics.jsonl')) as f:
    return [json.loads(line) for line in f]


def test_server_rule_model_dataset_and_trace(outside):
  _, work, _ = outside
  script(outside, 'train.py', '--config=my_config.py:mine', '--workdir=runs/mine')
  recs = metrics(work, 'mine')
  assert [r['step'] for r in recs] == [0, 5, 10]
  assert 'server_mean_scale' in recs[-1]  # the rule's metric, under the server/ prefix
  assert recs[-1]['test_accuracy'] > 0.6  # 4 classes: chance is 0.25
  config = json.loads((work / 'runs' / 'mine' / 'config.json').read_text())
  assert [config[k] for k in ('algorithm', 'model', 'dataset')] == [
    'fedbuff_adam',
    'tiny_mlp',
    'blobs',
  ]
  assert config['schedule']['kind'] == 'trace' and recs[-1]['wall_clock'] > 0


def test_client_rule(outside):
  _, work, _ = outside
  script(outside, 'train.py', '--config=my_config.py:clip', '--workdir=runs/clip')
  assert metrics(work, 'clip')[-1]['test_accuracy'] > 0.5


def test_user_algorithm_against_fedbuff_over_three_seeds(outside):
  _, work, _ = outside
  script(outside, 'train.py', '--config=my_config.py:compare', '--workdir=runs/compare')
  summary = json.loads((work / 'runs' / 'compare' / 'summary.json').read_text())
  lrs = {r['config']['algorithm']: r['config']['hparams']['server_lr'] for r in summary['runs']}
  assert lrs == {'fedbuff': 1.0, 'fedbuff_adam': 0.01}  # each its own, recorded
  args = ['runs/compare', '--table', '--baseline=fedbuff', '--x=seconds', '--out=compare.png']
  out = script(outside, 'plot.py', *args)
  assert (work / 'compare.png').stat().st_size > 0
  rows = {line.split('|')[1].strip(): line for line in out.splitlines() if line.startswith('| f')}
  assert set(rows) == {'fedbuff', 'fedbuff_adam'}, out
  assert all(re.search(r'\|\s+3 \|', row) for row in rows.values()), out  # 3 seeds each
  assert 'Δ final vs fedbuff' in out


def test_own_compressor_counts_its_bits(outside):
  _, work, _ = outside
  script(outside, 'train.py', '--config=my_config.py:compressed', '--workdir=runs/compressed')
  summary = json.loads((work / 'runs' / 'compressed' / 'summary.json').read_text())
  assert summary['status'] == 'completed' and summary['test_accuracy'] > 0.5
  d = (8 * 32 + 32) + (32 * 4 + 4)  # tiny_mlp(width=32) on 8 features, 4 classes
  arrivals = summary['schedule']['arrivals']
  assert metrics(work, 'compressed')[-1]['bytes_up'] == arrivals * (d + 32) / 8


def test_equal_time_and_equal_mb_budgets(outside):
  _, work, _ = outside
  script(outside, 'train.py', '--config=my_config.py:budget', '--workdir=runs/budget')
  runs = json.loads((work / 'runs' / 'budget' / 'summary.json').read_text())['runs']
  end = {a: [r['wall_clock'] for r in runs if r['algorithm'] == a] for a in ('fedasync', 'fedbuff')}
  assert max(end['fedasync']) < min(end['fedbuff']) and 12 < min(end['fedbuff'])  # M = 1, 3
  groups = results.methods(results.load([str(work / 'runs' / 'budget')]))  # as plot.py reads
  for at, head in (('seconds:12', 'at 12 simulated seconds'), ('mb:0.05', 'at 0.05 MB uploaded')):
    frame = results.table(groups, baseline='fedbuff', at=results.parse_at(at))
    out = results.markdown(frame)
    assert f'final test accuracy {head}' in out, out
    rows = [line for line in out.splitlines() if line.startswith('| fedasync')]
    assert len(rows) == 1 and '(n=3)' in rows[0], out


def test_own_claim_through_the_protocol(outside):
  _, work, _ = outside
  out = script(outside, 'reproduce.py', '--paper=my_claims.py', '--out_dir=runs/repro')
  assert 'FedBuff-Adam reaches a higher final test accuracy than FedBuff' in out
  assert re.search(r'\*\*(agrees|disagrees|inconclusive)', out), out
  assert (work / 'records' / 'my_claims.csv.gz').exists()
  assert 'FedBuff-Adam' in (work / 'my_claims.md').read_text()


@pytest.mark.parametrize(
  'paper,line',
  [  # the user's declaration missing a field; the bundled papers load from the install
    ('broken_claims.py', "missing 1 required positional argument: 'worse'"),
    ('fedgm', 'error: --only=nope: not among sync, multistage, autonomous, autonomous_w10,'),
  ],
)
def test_a_bad_declaration_or_selection_is_one_line(outside, paper, line):
  _, work, _ = outside
  text = (work / 'my_claims.py').read_text()
  text = text.replace("    'FedBuff-Adam',\n    'FedBuff',\n", "    'FedBuff-Adam',\n")
  (work / 'broken_claims.py').write_text(text)
  proc = script(outside, 'reproduce.py', f'--paper={paper}', '--only=nope', ok=False)
  assert proc.returncode == 1 and 'Traceback' not in proc.stderr, proc.stderr
  assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
  assert line in proc.stderr, proc.stderr


def test_docs_show_the_example_files_as_they_are():
  """Every code block of docs/extending.md headed by a file of examples/extending/ is in it."""
  text = open(os.path.join(REPO, 'docs', 'extending.md')).read()
  blocks = re.findall(r'```python\n# examples/extending/(\S+)\n(.*?)```', text, re.S)
  assert len(blocks) >= 6
  lines = lambda t: '\n'.join(line.strip() for line in t.strip().splitlines())
  for name, body in blocks:  # the same lines (an excerpt may be dedented)
    assert lines(body) in lines(open(os.path.join(EXAMPLES, name)).read()), (name, body[:200])
  assert set(os.listdir(EXAMPLES)) >= {'my_components.py', 'my_config.py', 'my_claims.py'}
  assert glob.glob(os.path.join(EXAMPLES, 'jobs.csv'))
