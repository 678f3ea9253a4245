#!/usr/bin/env bash
# Prepares the benchmark run: builds vigil-bench in release mode
# (with the Vigil kernels' PTX embedded) and gathers it, the nvcc twins'
# CUDA sources and the run script into bench-run/ (git-ignored).
#
# Then, on the GPU machine (this repo's device tool: carry "bench-run"):
#   bash bench-run/run.sh            # writes bench-results.{md,json} to $OUT or .
# It ends within about 400 s (BENCH_TOTAL_S). Arguments after run.sh go to
# vigil-bench (e.g. --only copy,axpy --no-tools --budget 600 --case-limit 60).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="$root/bench-run"
rm -rf "$out"
mkdir -p "$out/cuda"

# A smaller binary travels faster; report locations come from #[track_caller].
export CARGO_PROFILE_RELEASE_DEBUG=false
export CARGO_PROFILE_RELEASE_STRIP=debuginfo

echo "== building vigil-bench (release)"
cargo build --release -p vigil-bench --bin vigil-bench
cp target/release/vigil-bench "$out/"
cp benches/cuda/twins.cu "$out/cuda/"
cp scripts/bench-run.sh "$out/run.sh"
du -sh "$out"
echo "prepared: run 'bash bench-run/run.sh' on the GPU machine"
