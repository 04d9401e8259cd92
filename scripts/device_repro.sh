#!/usr/bin/env bash
# One declared reproduction on a lent accelerator (the workplace's `device` tool), e.g. a
# paper-length experiment declared run=False (configs/repro/<paper>.py):
#
#   bash scripts/device_repro.sh masfl fig1_noniid_t600
#
# The accelerator's image has JAX, flax, optax, orbax, chex, pandas, scipy, matplotlib
# and absl but neither ml_collections nor tensorboardX, and it cannot fetch anything or
# install Debian's dataset-fashion-mnist. Prepare both here, once, in the repository root:
#
#   echo /.whl/ >> .git/info/exclude; echo /.fmnist/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 -d .whl ml_collections tensorboardX
#   mkdir -p .fmnist && cp /usr/share/datasets/fashion-mnist/*.gz .fmnist/
#
# then call the tool with command 'bash scripts/device_repro.sh masfl fig1_noniid_t600',
# carry ['.whl', '.fmnist'] and a timeout_s below the per-call limit. The run's log and
# the paper's updated records (docs/results/records/<paper>.{csv.gz,json}) come back
# under $OUT: copy the two record files into docs/results/records/ here and rebuild the
# pages with `python scripts/report.py --write`.
set -euo pipefail
paper="${1:?usage: device_repro.sh PAPER EXPERIMENT}"
experiment="${2:?usage: device_repro.sh PAPER EXPERIMENT}"
out="${OUT:?OUT (the folder whose files come back) is not set}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" AFL_JAX_DATA="$PWD/.fmnist" PYTHONUNBUFFERED=1
python3 -c 'import jax; print("devices:", jax.devices())' | tee "$out/log"
status=0
python3 scripts/reproduce.py --paper="$paper" --only="$experiment" 2>&1 | tee -a "$out/log" ||
  status=$?
cp "docs/results/records/$paper.csv.gz" "docs/results/records/$paper.json" "$out/"
exit "$status"
