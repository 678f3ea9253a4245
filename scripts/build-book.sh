#!/usr/bin/env bash
# Builds the user guide (docs/, an mdBook) into docs/book and checks it:
# every chapter, relative link, #anchor and {{#include}} resolves, and the
# README's code is code CI builds (scripts/check-book.py). Installs the
# pinned mdbook into target/tools on first use (a few minutes, from
# crates.io).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=0.5.4
mdbook="$root/target/tools/bin/mdbook"
if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$version"; then
  echo "installing mdbook $version into target/tools"
  cargo install --locked --quiet mdbook --version "$version" \
    --no-default-features --features search --root "$root/target/tools"
fi
python3 scripts/check-book.py
"$mdbook" build docs
echo "build-book: docs/book/index.html"
