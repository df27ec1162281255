#!/usr/bin/env bash
# Install retrieval-node and everything it needs on a fresh machine (offline-capable models, CPU torch).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# CPU build of torch first: any other torch pulls a multi-GB CUDA build.
"$PY" -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
"$PY" -m pip install --quiet --disable-pip-version-check -e ".[test,bench]"
