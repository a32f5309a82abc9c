#!/usr/bin/env bash
# Bounded coverage-guided fuzzing (libFuzzer) of every target in this
# directory, for CI: FUZZ_SECONDS per target (default 60), corpus kept in
# fuzz/corpus/<target> between runs on the same machine, crashes written to
# fuzz/artifacts/<target>/ and failing the run.
#
# libFuzzer's coverage flags need a nightly toolchain; cargo-fuzz is not
# needed (this sets the same flags). Without nightly the script says so and
# exits 0: a fresh machine cannot download a toolchain.
set -euo pipefail
cd "$(dirname "$0")"

secs=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"parse_packet connection auth_messages auth_gate offload wire_profiles endpoint_auth protected_mutations"}

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: SKIP (no nightly toolchain on this machine)"
  exit 0
fi
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
bins=()
for t in $targets; do bins+=(--bin "$t"); done
# --target keeps the instrumentation off build scripts (as cargo-fuzz does).
cargo +nightly build --release --target "$triple" "${bins[@]}"
for t in $targets; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log=$(mktemp)
  dirs=("corpus/$t")
  [ -d "seeds/$t" ] && dirs+=("seeds/$t")   # read-only seeds reach multi-record inputs
  if ! "./target/$triple/release/$t" -max_total_time="$secs" -max_len=4096 \
      -artifact_prefix="artifacts/$t/" "${dirs[@]}" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $t FAILED (reproducer in fuzz/artifacts/$t/)"
    exit 1
  fi
  runs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -n 1)
  echo "fuzz: $t ok: ${runs:-no summary}, corpus $(ls "corpus/$t" | wc -l) inputs"
  rm -f "$log"
done
