#!/usr/bin/env bash
# Builds templates/vigil-app from a clean copy OUTSIDE this workspace, by the
# steps of the README's "Your own project" section, and runs its test (on
# the CPU backend when there is no GPU). CI runs this so the template and
# the README cannot rot.
#
# VIGIL_TEMPLATE_TARGET_DIR: the copy's target directory (default
# target/template-check here, so repeated runs reuse compiled dependencies;
# the sources are always a fresh copy).
set -euo pipefail
VIGIL=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vigil-template.XXXXXX")
trap 'rm -rf "$work"' EXIT

# README steps.
cp -r "$VIGIL/templates/vigil-app" "$work/my-app"
cd "$work/my-app"
sed -i "s#\.\./vigil/#$VIGIL/#" Cargo.toml
rustup toolchain install

# Not a README step: start from the workspace's lock file, so the copy
# builds with the dependency versions the workspace is tested with.
cp "$VIGIL/Cargo.lock" Cargo.lock
export CARGO_TARGET_DIR="${VIGIL_TEMPLATE_TARGET_DIR:-$VIGIL/target/template-check}"

cargo test
cargo run -p my-app
echo "check-template: a clean copy of templates/vigil-app builds and passes its test"
