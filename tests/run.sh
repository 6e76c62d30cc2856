#!/usr/bin/env bash
# Runs the whole test suite: unit, contract and end-to-end tests against the real binary.
# Starts every service the tests need first (the foundation needs none beyond the binary).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/sluice-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# The end-to-end tests drive target/debug/sluice.
cargo build --locked -p sluice --bins

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --locked --workspace --no-fail-fast "$@"
else
  echo "cargo-nextest not found; using cargo test" >&2
  cargo test --locked --workspace --no-fail-fast "$@"
fi
