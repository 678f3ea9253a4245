#!/usr/bin/env bash
# Runs the benchmark suite on a GPU machine (copied to bench-run/run.sh by
# scripts/prepare-bench.sh): compiles the CUDA C++ twins with
# `nvcc -O3 -arch=sm_90 -cubin`, then runs vigil-bench, which times Vigil,
# the twins, Vigil sanitized and the twins under compute-sanitizer, and
# writes bench-results.md and bench-results.json to $OUT (or the current
# directory), rewritten after every case, so that a run ended from outside
# still leaves its table. A failing step is reported and the run goes on
# without it. Arguments go to vigil-bench (after the defaults, so they win).
#
# Time: the whole script aims at BENCH_TOTAL_S seconds (default 400, under
# seven minutes on an H100): what nvcc leaves of it is vigil-bench's
# --budget, which the sanitized and compute-sanitizer columns share after
# the plain columns; a sanitized or tool case is killed 20 s after its
# first launch (--case-limit), its cell then reading "> T s (killed)".
set -uo pipefail
script_start=$(date +%s)
total=${BENCH_TOTAL_S:-400}
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD}
export PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
args=()
if command -v nvcc >/dev/null; then
  nvcc --version | tail -n 2
  # The cubin runs; the PTX beside it lets vigil-bench check each twin's
  # parameter list against the Vigil kernel's.
  if nvcc -O3 -arch=sm_90 -cubin -Xptxas -v -o "$here/twins.cubin" "$here/cuda/twins.cu" \
    >"$out/nvcc-twins.log" 2>&1 &&
    nvcc -O3 -arch=sm_90 -ptx -o "$here/twins.ptx" "$here/cuda/twins.cu" >>"$out/nvcc-twins.log" 2>&1; then
    args+=(--twins "$here/twins.cubin")
  else
    echo "nvcc failed; the twin columns will say so. Its output:"
    tail -n 30 "$out/nvcc-twins.log"
  fi
else
  echo "no nvcc on PATH: the twin columns will say so"
fi
if command -v compute-sanitizer >/dev/null; then
  args+=(--compute-sanitizer "$(command -v compute-sanitizer)")
else
  echo "no compute-sanitizer on PATH: its columns are skipped"
  args+=(--no-tools)
fi
start=$(date +%s)
budget=$((total - (start - script_start)))
if [ "$budget" -lt 60 ]; then budget=60; fi
echo "vigil-bench: budget $budget s, 20 s per sanitized or tool case"
"$here/vigil-bench" "${args[@]}" --budget "$budget" --case-limit 20 --out "$out" "$@"
rc=$?
echo "vigil-bench: exit code $rc after $(( $(date +%s) - start )) s"
exit $rc
