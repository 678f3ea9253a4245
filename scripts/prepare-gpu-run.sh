#!/usr/bin/env bash
# Prepares a GPU run: builds every test binary, example and benchmark in
# release mode, with the PTX, into gpu-run/ (git-ignored), plus gpu-run/run-all.sh,
# which runs them all with VIGIL_REQUIRE_GPU=1 (GPU tests fail instead of skipping),
# each under a time limit, one result line per binary.
#
# Then, on a machine with a GPU (this repo's device tool: carry "gpu-run"):
#   bash gpu-run/run-all.sh                 # every binary, 300 s each
#   VIGIL_GPU_RUN_TIMEOUT=120 bash gpu-run/run-all.sh hangs
#
# Arguments are cargo package selectors (default --workspace), e.g.
#   scripts/prepare-gpu-run.sh -p vigil -p vigil-tests
set -euo pipefail
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(--workspace)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="$root/gpu-run"
rm -rf "$out"
mkdir -p "$out/bin" "$out/examples" "$out/ptx"

# Smaller binaries travel faster; locations in reports come from
# #[track_caller], not from debug info.
export CARGO_PROFILE_RELEASE_DEBUG=false
export CARGO_PROFILE_RELEASE_STRIP=debuginfo

echo "== building and validating the PTX"
bash "$root/scripts/validate-ptx.sh" | tail -n 1

echo "== building test binaries"
cargo test "${packages[@]}" --release --no-run --message-format=json-render-diagnostics \
  | python3 -c '
import json, sys, shutil, os
out = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        name = m["target"]["name"].replace("-", "_")
        kind = m["target"]["kind"][0]
        if kind == "proc-macro":
            # Links the libstd .so of the Rust toolchain, absent on the GPU machines.
            print("   (skipped: needs the Rust shared libraries)", name)
            continue
        pkg = m["package_id"].split("#")[-1].split("@")[0].split("/")[-1]
        dest = os.path.join(out, "bin", f"{pkg}-{kind}-{name}")
        shutil.copy(m["executable"], dest)
        print("  ", os.path.basename(dest))
' "$out"

echo "== building examples"
cargo build "${packages[@]}" --release --examples --message-format=json-render-diagnostics \
  | python3 -c '
import json, sys, shutil, os
out = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "example" in m["target"]["kind"]:
        dest = os.path.join(out, "examples", m["target"]["name"])
        shutil.copy(m["executable"], dest)
        print("  ", os.path.basename(dest))
' "$out"

cp target/vigil-ptx/nvptx64-nvidia-cuda/release/*.ptx "$out/ptx/" 2>/dev/null || true
cp scripts/gpu-run-all.sh "$out/run-all.sh"
du -sh "$out"
echo "prepared: run 'bash gpu-run/run-all.sh' on the GPU machine"
