#!/usr/bin/env bash
# Prints the path of a ptxas: $PTXAS, one on PATH, or the one shipped in
# PyPI's nvidia-cuda-nvcc-cu12 wheel, installed into target/tools on first use.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${PTXAS:-}" ]; then echo "$PTXAS"; exit 0; fi
if command -v ptxas >/dev/null 2>&1; then command -v ptxas; exit 0; fi
tools="$root/target/tools/nvcc"
bin="$tools/nvidia/cuda_nvcc/bin/ptxas"
if [ ! -x "$bin" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$tools" nvidia-cuda-nvcc-cu12==12.9.86 >&2
fi
echo "$bin"
