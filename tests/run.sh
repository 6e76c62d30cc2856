#!/usr/bin/env bash
# Runs the whole test suite: unit, contract and end-to-end tests against the real binary.
# Installs what building and the test services need first (skipped when present); each
# test starts the services it uses (PostgreSQL, the Kafka-protocol broker, …) through the
# scripts in tests/services/ on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/sluice-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

tests/services/setup.sh

# One build for everything: the sluice package's own integration test makes this build
# the target/debug/sluice executable (with the same features) that the end-to-end tests drive.
# The tests then run with no system Python on PATH (python, python3 and pip fail), so a test
# that reaches for an interpreter other than the project's venvs fails instead of passing on
# a machine where someone installed packages by hand.
guard=$(mktemp -d)
# Containers, networks and volumes of container tests that were killed before they could clean
# up, and images left untagged by rebuilds, go before and after the run.
tests/services/docker.sh clean sluice-it-
tidy() {
  rm -rf "$guard"
  tests/services/docker.sh clean sluice-it- || true
  docker image prune -f --filter label=sluice.inputs >/dev/null 2>&1 || true
}
trap tidy EXIT
for name in python python3 pip pip3; do
  printf '#!/bin/sh\necho "%s: tests use the venvs under $HOME/.cache/sluice-test, not the system Python" >&2\nexit 127\n' "$name" >"$guard/$name"
  chmod +x "$guard/$name"
done
# The connectors crate builds without its heaviest feature (the S3 sink): nothing else may
# lean on it.
cargo check --locked --quiet -p sluice-connectors --no-default-features
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --locked --workspace --no-run
  # The container tests start several containers each: they run after the rest, so the
  # timing-sensitive tests (group membership, exactly-once) never share the 2 cores with them.
  containers='test(/^cluster::/) | test(/^image::/)'
  status=0
  PATH="$guard:$PATH" PYTHONPATH= PYTHONHOME= cargo nextest run --locked --workspace --no-fail-fast --no-tests=warn \
    -E "not ($containers)" "$@" || status=$?
  PATH="$guard:$PATH" PYTHONPATH= PYTHONHOME= cargo nextest run --locked --workspace --no-fail-fast --no-tests=warn \
    -E "$containers" "$@" || status=$?
  exit "$status"
else
  echo "cargo-nextest not found; using cargo test" >&2
  cargo test --locked --workspace --no-run
  PATH="$guard:$PATH" PYTHONPATH= PYTHONHOME= cargo test --locked --workspace --no-fail-fast "$@"
fi
