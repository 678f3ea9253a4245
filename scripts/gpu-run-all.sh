#!/usr/bin/env bash
# Runs everything scripts/prepare-gpu-run.sh built, on a machine with a GPU:
# every test binary (one test at a time) and every example, each under a
# time limit. GPU tests fail instead of skipping (VIGIL_REQUIRE_GPU=1).
#
# Prints one result line per binary as it ends:
#   PASS|FAIL|TIMEOUT <binary> <seconds>s [<passed> passed; <failed> failed; <skipped> skipped]
# (a failure's or timeout's log tail follows, indented), then every
# binary's line again and a summary. A binary that runs past its limit is
# killed and counts as failed. Exits non-zero on any failure.
#
# Arguments: optional name filters (substring match on the binary name).
# VIGIL_GPU_RUN_TIMEOUT: the per-binary limit in seconds (default 300).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export VIGIL_REQUIRE_GPU=1
export RUST_BACKTRACE=1
limit=${VIGIL_GPU_RUN_TIMEOUT:-300}
# The engine's PTX check kernel, for vigil-shared-ptx-check's GPU test.
if [ -f "$here/ptx/vigil_shared_ptx_check.ptx" ]; then
  export VIGIL_PTX_CHECK_PTX="$here/ptx/vigil_shared_ptx_check.ptx"
fi
log_dir=/tmp/vigil-gpu-logs
mkdir -p "$log_dir"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
echo "per-binary limit: ${limit}s"
pass=0
fail=0
timed_out=0
lines=()

# "<passed> passed; <failed> failed; <skipped> skipped", summed over the
# log's `test result:` lines (libtest's "ignored" counts as skipped);
# empty when there are none (examples).
counts() {
  grep -E '^test result:' "$1" | awk '
    { for (i = 2; i <= NF; i++) {
        w = $i; gsub(/[;,.]/, "", w)
        if (w == "passed") p += $(i - 1)
        else if (w == "failed") f += $(i - 1)
        else if (w == "skipped" || w == "ignored") s += $(i - 1)
      } n++ }
    END { if (n) printf "%d passed; %d failed; %d skipped", p, f, s }'
}

run() {
  local name=$1
  shift
  local log="$log_dir/$name.log"
  local start=$(date +%s%N)
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local secs="$((ms / 1000)).$(printf %03d $((ms % 1000)))"
  local result
  case $rc in
    0) result=PASS ;;
    124 | 137) result=TIMEOUT ;;
    *) result=FAIL ;;
  esac
  local c=$(counts "$log")
  local line="$result $name ${secs}s${c:+ [$c]}"
  [ "$result" = FAIL ] && line="$line (exit $rc)"
  [ "$result" = TIMEOUT ] && line="$line (killed after ${limit}s)"
  lines+=("$line")
  echo "$line"
  if [ "$result" = PASS ]; then
    pass=$((pass + 1))
    # The examples' figures, for the record.
    grep -E "^(bandwidth|ratio|figure)" "$log" | head -20 | sed 's/^/    /'
  else
    fail=$((fail + 1))
    [ "$result" = TIMEOUT ] && timed_out=$((timed_out + 1))
    tail -n 40 "$log" | sed 's/^/    /'
  fi
}

matches() {
  [ ${#FILTERS[@]} -eq 0 ] && return 0
  local f
  for f in "${FILTERS[@]}"; do [[ $1 == *"$f"* ]] && return 0; done
  return 1
}
FILTERS=("$@")
for t in "$here"/bin/*; do
  [ -e "$t" ] || continue
  n=$(basename "$t")
  matches "$n" && run "$n" "$t" --test-threads=1
done
for e in "$here"/examples/*; do
  [ -e "$e" ] || continue
  n=$(basename "$e")
  matches "$n" && run "example-$n" "$e"
done
if [ -n "${OUT:-}" ]; then tar czf "$OUT/gpu-logs.tgz" -C "$log_dir" . ; fi
echo
echo "== every binary"
for l in "${lines[@]}"; do echo "$l"; done
echo "$((pass + fail)) binaries: $pass passed, $fail failed ($timed_out timed out)"
[ $fail -eq 0 ]
