#!/usr/bin/env bash
# Runs everything scripts/prepare-gpu-run.sh built, on a machine with a GPU.
# GPU tests fail instead of skipping (VIGIL_REQUIRE_GPU=1). Prints one
# PASS/FAIL line per binary and a summary; exits non-zero on any failure.
# Arguments: optional name filters (substring match on the binary name).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export VIGIL_REQUIRE_GPU=1
export RUST_BACKTRACE=1
log_dir=/tmp/vigil-gpu-logs
mkdir -p "$log_dir"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
pass=0
fail=0
failed=()
run() {
  local name=$1
  shift
  local start=$(date +%s%N)
  "$@" >"$log_dir/$name.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local secs="$((ms / 1000)).$(printf %03d $((ms % 1000)))"
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1))
    echo "PASS $name (${secs}s)"
  else
    fail=$((fail + 1))
    failed+=("$name")
    echo "FAIL $name (rc=$rc, ${secs}s)"
    tail -n 40 "$log_dir/$name.log"
  fi
  grep -E "^(test result|bandwidth|ratio|figure|  )" "$log_dir/$name.log" | grep -v "^  *$" | head -40 || true
}
matches() {
  [ ${#FILTERS[@]} -eq 0 ] && return 0
  local f
  for f in "${FILTERS[@]}"; do [[ $1 == *"$f"* ]] && return 0; done
  return 1
}
FILTERS=("$@")
for t in "$here"/bin/*; do
  n=$(basename "$t")
  matches "$n" && run "$n" "$t" --test-threads=1
done
for e in "$here"/examples/*; do
  n=$(basename "$e")
  matches "$n" && run "example-$n" "$e"
done
if [ -n "${OUT:-}" ]; then tar czf "$OUT/gpu-logs.tgz" -C "$log_dir" . ; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
