#!/usr/bin/env bash
# Builds the PTX of every kernel crate in the workspace, and the per-context
# cuts of vigil_kernels.ptx, and checks each file with `ptxas -arch=$ARCH -v`
# (default sm_90). Fails if any file is rejected
# or if no PTX was produced.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
arch=${VIGIL_CUDA_ARCH:-sm_90}
ptxas=$("$root/scripts/ptxas.sh")
ptx_dir="$root/target/vigil-ptx/nvptx64-nvidia-cuda/release"
# vigil-build's second, sanitized build of each kernel crate.
sanitized_dir="$root/target/vigil-ptx/sanitized/nvptx64-nvidia-cuda/release"

# Kernel crates built by a build.rs (vigil-build) land in target/vigil-ptx.
cargo build -p vigil-tests -p vigil-bench -p vigil-guide --quiet
# Crates that are PTX-only checks are built directly into the same directory.
for krate in $(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["metadata"] and p["metadata"].get("vigil", {}).get("ptx-check"):
        print(p["name"])'); do
  CARGO_ENCODED_RUSTFLAGS="-Ctarget-cpu=$arch" CARGO_PROFILE_RELEASE_DEBUG=false \
    cargo build -p "$krate" --release --target nvptx64-nvidia-cuda -Zbuild-std=core \
    --target-dir "$root/target/vigil-ptx" --quiet
done

# The cuts that plain and sanitized GPU contexts load (what the driver
# really JIT-compiles), written by the ptx_cut test.
cut_dir="$root/target/tmp/ptx-cuts"
rm -rf "$cut_dir"
cargo test -p vigil-tests --test ptx_cut --quiet >/dev/null

shopt -s nullglob
# A module with cuts is checked through its cuts (together they hold every
# entry, and they are what the driver JIT-compiles), each the way the driver
# compiles it: a sanitized cut as relocatable code (`-c`, the JIT linker's
# mode; whole-program it takes ptxas minutes), everything else whole-program.
files=("$cut_dir"/*.ptx)
for f in "$ptx_dir"/*.ptx "$sanitized_dir"/*.ptx; do
  stem=$(basename "$f" .ptx)
  cuts=("$cut_dir/$stem".*.ptx)
  [ ${#cuts[@]} -gt 0 ] || files+=("$f")
done
if [ ${#files[@]} -eq 0 ]; then
  echo "validate-ptx: no PTX files under $ptx_dir" >&2
  exit 1
fi
for f in "${files[@]}"; do
  mode=()
  case "$f" in *.sanitized.ptx | "$sanitized_dir"/*) mode=(-c) ;; esac
  echo "== ptxas -arch=$arch ${mode[*]} -v $(basename "$f")"
  if ! log=$("$ptxas" -arch="$arch" "${mode[@]}" -v "$f" -o /dev/null 2>&1); then
    echo "$log" >&2
    echo "validate-ptx: ptxas rejected $f" >&2
    exit 1
  fi
  echo "$log" | grep -E "error|warning|Compiling entry|Used" || true
done
echo "validate-ptx: ${#files[@]} PTX file(s) accepted by ptxas -arch=$arch"
