#!/usr/bin/env bash
# Usage: scripts/sass-stats.sh [CRATE] [REGEX]
#
# What the GPU will run, measured without a GPU: compiles a kernel crate's
# sanitized PTX (default vigil_bench_kernels, as `vigil-build` left it in
# target/vigil-ptx/sanitized) with ptxas for $VIGIL_CUDA_ARCH (default
# sm_90) at the default register cap of sanitized entries (with
# VIGIL_SASS_LEAN=1, the lean entries' cap, at which every sanitized
# entry starts), disassembles it with nvdisasm, and prints for each
# function whose name matches REGEX (default: every function) its SASS
# instruction count, the registers an entry point launches with (from a
# second, whole-program ptxas run: the most its callees need), its stack frame
# and the bytes it saves and restores around its calls (ptxas's "spill"
# figures, which for a called function are mostly the registers the call
# ABI makes it keep). Static counts: what a change does to the size of the
# hooks and the registers they hold, before a device run measures time.
#
# ptxas comes from scripts/ptxas.sh; nvdisasm from PyPI's
# nvidia-cuda-nvdisasm wheel, installed into target/tools on first use.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
crate=${1:-vigil_bench_kernels}
filter=${2:-.}
arch=${VIGIL_CUDA_ARCH:-sm_90}
ptx="$root/target/vigil-ptx/sanitized/nvptx64-nvidia-cuda/release/$crate.ptx"
if [ ! -f "$ptx" ]; then
  echo "no sanitized PTX at $ptx: build the crate first (cargo build -p <its package>)" >&2
  exit 1
fi
cap_name=DEFAULT_SANITIZED_REGISTERS
[ "${VIGIL_SASS_LEAN:-0}" = 1 ] && cap_name=LEAN_SANITIZED_REGISTERS
cap=$(sed -n "s/^pub const $cap_name: u32 = \([0-9]*\);/\1/p" \
  "$root/host/src/sanitizer/config.rs")
echo "ptxas -arch=$arch -maxrregcount $cap ($cap_name)"
ptxas=$("$root/scripts/ptxas.sh")
tools="$root/target/tools/disasm"
nvdisasm=$(find "$tools" -name nvdisasm -type f 2>/dev/null | head -n 1 || true)
if [ -z "$nvdisasm" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$tools" nvidia-cuda-nvdisasm==13.5.37 >&2
  nvdisasm=$(find "$tools" -name nvdisasm -type f | head -n 1)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Relocatable, as the driver's JIT linker compiles a sanitized module.
"$ptxas" -arch="$arch" -c -v -maxrregcount "$cap" -o "$work/m.cubin" "$ptx" >"$work/ptxas.txt" 2>&1
# Whole-program, for the registers each entry point launches with.
"$ptxas" -arch="$arch" -v -maxrregcount "$cap" -o "$work/w.cubin" "$ptx" >"$work/whole.txt" 2>&1
"$nvdisasm" "$work/m.cubin" >"$work/m.sass" 2>"$work/nvdisasm.txt"
python3 - "$work/ptxas.txt" "$work/m.sass" "$filter" "$work/whole.txt" <<'EOF'
import re, sys
stats_path, sass_path, pattern, whole_path = sys.argv[1:5]
want = re.compile(pattern)
def per_function(path, name_re, value_re):
    """What `value_re` matched, by the function `name_re` named on the line before."""
    found, current = {}, None
    for line in open(path):
        m = re.search(name_re, line)
        if m:
            current = m.group(1)
            continue
        m = re.search(value_re, line)
        if m and current:
            found[current] = tuple(int(x) for x in m.groups())
            current = None
    return found
props = per_function(stats_path, r"Function properties for (\S+)",
                     r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
registers = per_function(whole_path, r"Compiling entry function '(\S+)'", r"Used (\d+) registers")
counts, function = {}, None
for line in open(sass_path):
    m = re.match(r"^\s*\.text\.(\S+):\s*$", line) or re.match(r"^(\S+):\s*$", line.strip())
    if m and not line.strip().startswith(".L"):
        function = m.group(1)
        continue
    # An instruction, not a constant table's data (`.word`).
    if function and re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*[^.\s]", line):
        counts[function] = counts.get(function, 0) + 1
rows = sorted(((n, f) for f, n in counts.items() if want.search(f)), reverse=True)
print(f"{'instructions':>12} {'regs':>5} {'stack':>6} {'saved':>6}  function")
for n, f in rows:
    stack, saved, _ = props.get(f, (0, 0, 0))
    regs = registers.get(f, ("-",))[0]
    print(f"{n:>12} {regs:>5} {stack:>6} {saved:>6}  {f}")
print(f"{sum(n for n, _ in rows):>12} in {len(rows)} functions")
EOF
