#!/usr/bin/env bash
# Fuzzes the byte readers: builds the cargo-fuzz targets of fuzz/ (libFuzzer) and runs each
# for a bounded time on a copy of its seed corpus (fuzz/corpus/<target>, left as committed),
# with its dictionary of boundary values when it has one (fuzz/dict/<target>.dict).
#
#   bench/fuzz.sh [SECONDS_PER_TARGET] [--json PATH] [--targets a,b,...]
#
# SECONDS_PER_TARGET defaults to 60. Prints one row per target: executions (libFuzzer's
# stat::number_of_executed_units), crashes, seconds. --json writes the same table as a JSON
# array of one object per target (target, executions, crashes, seconds, …).
# A target stops at its first crash (a panic, an overflow, an out-of-memory or a timeout of
# one input); the crashing input is kept in fuzz/artifacts/<target>/ and the script exits 1
# after printing how to replay it. Turn each crash into a regular #[test] in the crate that
# owns the code (see fuzz/README.md).
#
# Toolchain: cargo-fuzz wants nightly; a stable rustc accepts its -Z flags with
# RUSTC_BOOTSTRAP=1, which this script sets. cargo-fuzz is installed (cargo install
# --locked) when `cargo fuzz` is missing. Environment:
#   FUZZ_SANITIZER   address (default: AddressSanitizer, its runtime ships with rust-std)
#                    or none
#   FUZZ_TARGET_DIR  build directory (default ~/.cache/sluice-fuzz-target; debug assertions
#                    and overflow checks are on, as in tests)
#   CARGO_LOCK       when set, every cargo command runs under `flock $CARGO_LOCK` (a machine
#                    shared by several builds)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

seconds=60
json=""
only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json=${2:?--json needs a path}; shift 2 ;;
    --targets) only=${2:?--targets needs a list}; shift 2 ;;
    -h|--help) usage ;;
    [0-9]*) seconds=$1; shift ;;
    *) echo "unknown argument: $1" >&2; usage 2 ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "SECONDS_PER_TARGET must be a positive integer" >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
fuzz_dir="$root/fuzz"
sanitizer=${FUZZ_SANITIZER:-address}
target_dir=${FUZZ_TARGET_DIR:-$HOME/.cache/sluice-fuzz-target}
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTC_BOOTSTRAP=1

cargo_() {
  if [[ -n "${CARGO_LOCK:-}" ]]; then flock "$CARGO_LOCK" cargo "$@"; else cargo "$@"; fi
}

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  cargo_ install cargo-fuzz --locked
fi

all_targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz_dir/Cargo.toml" | grep -v '^sluice-fuzz$')
targets=${only//,/ }
targets=${targets:-$all_targets}
for t in $targets; do
  grep -qx "$t" <<<"$all_targets" || { echo "no fuzz target $t (have: $(echo $all_targets))" >&2; exit 2; }
done

echo "building the fuzz targets (sanitizer: $sanitizer, into $target_dir)" >&2
build_start=$(date +%s)
(cd "$root" && cargo_ fuzz build --fuzz-dir "$fuzz_dir" --sanitizer "$sanitizer" --debug-assertions --target-dir "$target_dir")
echo "build took $(($(date +%s) - build_start)) s" >&2
bin_dir="$target_dir/$triple/release"

# Scratch space: the corpus each run grows, and the files the log target writes (TMPDIR),
# in memory when the machine has it.
scratch_parent=/dev/shm
[[ -d "$scratch_parent" && -w "$scratch_parent" ]] || scratch_parent=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$scratch_parent/sluice-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

rows=()
crashed=()
for t in $targets; do
  mkdir -p "$scratch/$t/corpus" "$scratch/$t/tmp" "$fuzz_dir/artifacts/$t"
  seeds=0
  if [[ -d "$fuzz_dir/corpus/$t" ]]; then
    cp -R "$fuzz_dir/corpus/$t/." "$scratch/$t/corpus/"
    seeds=$(find "$fuzz_dir/corpus/$t" -type f | wc -l)
  fi
  before=$(find "$fuzz_dir/artifacts/$t" -type f | sort)
  log="$scratch/$t.log"
  echo "fuzzing $t for ${seconds} s ($seeds seeds)" >&2
  start=$(date +%s%N)
  dict=()
  [[ -f "$fuzz_dir/dict/$t.dict" ]] && dict=(-dict="$fuzz_dir/dict/$t.dict")
  status=0
  TMPDIR="$scratch/$t/tmp" "$bin_dir/$t" "$scratch/$t/corpus" "${dict[@]}" \
    -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$fuzz_dir/artifacts/$t/" >"$log" 2>&1 || status=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  # Without final stats (killed hard), the last status line's count.
  [[ -n "$execs" ]] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  execs=${execs:-0}
  new_artifacts=$(comm -13 <(echo "$before") <(find "$fuzz_dir/artifacts/$t" -type f | sort) | sed '/^$/d' | paste -sd, -)
  crashes=$(tr ',' '\n' <<<"$new_artifacts" | grep -c . || true)
  if [[ $status -ne 0 || $crashes -gt 0 ]]; then
    crashed+=("$t")
    cp "$log" "$fuzz_dir/artifacts/$t/last-run.log"
    [[ $crashes -gt 0 ]] || crashes=1 # died without an artifact: see its log
    grep -m1 -A15 -E '^(==[0-9]+==ERROR|thread .* panicked|panicked at)' "$log" >&2 || tail -20 "$log" >&2
  fi
  corpus_after=$(find "$scratch/$t/corpus" -type f | wc -l)
  rows+=("$t $execs $crashes $((ms / 1000)).$((ms % 1000 / 100)) $seeds $corpus_after ${new_artifacts:--}")
done

printf '\n%-20s %14s %8s %9s %7s %8s\n' target executions crashes seconds seeds corpus
for row in "${rows[@]}"; do
  read -r t execs crashes secs seeds after _ <<<"$row"
  printf '%-20s %14s %8s %9s %7s %8s\n' "$t" "$execs" "$crashes" "$secs" "$seeds" "$after"
done

if [[ -n "$json" ]]; then
  # The table: one object per target, in the order run.
  {
    printf '['
    sep=""
    for row in "${rows[@]}"; do
      read -r t execs crashes secs seeds after artifacts <<<"$row"
      list=""
      for a in ${artifacts//,/ }; do [[ "$a" == - ]] || list+="${list:+, }\"$a\""; done
      printf '%s\n  {"target": "%s", "executions": %s, "crashes": %s, "seconds": %s, "seed_inputs": %s, "corpus_inputs": %s, "sanitizer": "%s", "artifacts": [%s]}' \
        "$sep" "$t" "$execs" "$crashes" "$secs" "$seeds" "$after" "$sanitizer" "$list"
      sep=","
    done
    printf '\n]\n'
  } >"$json"
  echo "wrote $json" >&2
fi

if [[ ${#crashed[@]} -gt 0 ]]; then
  echo >&2
  for row in "${rows[@]}"; do
    read -r t _ crashes _ _ _ artifacts <<<"$row"
    [[ $crashes -gt 0 ]] || continue
    echo "crash in $t (log: fuzz/artifacts/$t/last-run.log)" >&2
    for a in ${artifacts//,/ }; do
      [[ "$a" == - ]] && continue
      echo "  artifact: $a" >&2
      echo "  replay:   $bin_dir/$t $a" >&2
    done
  done
  exit 1
fi
