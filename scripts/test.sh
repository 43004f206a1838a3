#!/usr/bin/env bash
# Runs every test of the workspace on a fresh machine. Installs what the tests need first.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
  echo "cargo is required (Rust toolchain 1.88 or newer)" >&2
  exit 1
fi

# release mode: the quality tests train 200 rounds on every bundled dataset
cargo test --workspace --release --locked
