"""Every script answers --help with its usage and exit status 0, and writes nothing."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.name for p in (ROOT / 'scripts').glob('*.py'))


@pytest.mark.parametrize('script', SCRIPTS)
def test_help_exits_zero_and_writes_nothing(script, tmp_path):
  proc = subprocess.run(
    [sys.executable, str(ROOT / 'scripts' / script), '--help'],
    capture_output=True,
    text=True,
    cwd=tmp_path,
    env=dict(os.environ, JAX_PLATFORMS='cpu'),
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  assert 'flags' in proc.stdout.lower() and 'Traceback' not in proc.stderr
  assert list(tmp_path.iterdir()) == []
