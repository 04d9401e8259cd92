#!/usr/bin/env bash
# Install afl_jax and what it needs on a fresh machine:
#  - Fashion-MNIST from Debian's dataset-fashion-mnist package (where apt is available),
#  - the Python package with its test extras (editable).
set -u
FMNIST=/usr/share/datasets/fashion-mnist
if [ ! -d "$FMNIST" ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
  ($SUDO apt-get update -qq && $SUDO apt-get install -y -qq dataset-fashion-mnist) \
    >/dev/null 2>&1 || echo "setup: could not apt-get install dataset-fashion-mnist;" \
      "Fashion-MNIST runs need it (or --config.data_dir / AFL_JAX_DATA)." >&2
fi
python -m pip install -q -e ".[test]" 2>&1 | grep -v "Running pip as the 'root' user" || true
python -c "import afl_jax" || { echo "setup: afl_jax failed to import" >&2; exit 1; }
