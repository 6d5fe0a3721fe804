#!/usr/bin/env bash
# Run every cargo-fuzz target in fuzz/ for a fixed number of executions and print execs and crashes per target.
#
#   scripts/fuzz.sh [EXECS] [TARGET...]      # EXECS defaults to 10000; TARGETs default to all five
#
# cargo-fuzz drives libFuzzer with nightly-only compiler flags; on a stable toolchain RUSTC_BOOTSTRAP=1
# allows them. Seeds come from fuzz/seeds/<target>/ and are copied into a scratch corpus
# (fuzz/corpus/<target>/, git-ignored) that libFuzzer grows. Crash inputs land in fuzz/artifacts/<target>/;
# copy each one into fuzz/regressions/<target>/ once its bug is fixed (`cargo test --manifest-path
# fuzz/Cargo.toml` replays them). FUZZ_SANITIZER=none|address (default address). FUZZ_SUMMARY=FILE also
# writes the figures as JSON lines. Exit status 1 when any target crashed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

execs="${1:-10000}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(build_toml metadata_json commit_ndjson elf_reader variant_name)
fi
case "$execs" in
  '' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh [EXECS] [TARGET...]: EXECS must be a number, got '$execs'" >&2
    exit 2
    ;;
esac

cargo_fuzz_version=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q " $cargo_fuzz_version"; then
  echo "installing cargo-fuzz $cargo_fuzz_version (once)" >&2
  cargo install --locked cargo-fuzz --version "$cargo_fuzz_version" >&2
fi

export RUSTC_BOOTSTRAP=1
sanitizer="${FUZZ_SANITIZER:-address}"
summary="${FUZZ_SUMMARY:-}"
[ -n "$summary" ] && : >"$summary"

echo "building fuzz targets (sanitizer: $sanitizer)" >&2
cargo fuzz build --features libfuzzer --sanitizer "$sanitizer" --debug-assertions >&2

total_crashes=0
printf '%-15s %10s %8s %8s\n' target execs seconds crashes
for t in "${targets[@]}"; do
  corpus="fuzz/corpus/$t"
  artifacts="fuzz/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  log="fuzz/artifacts/$t.log"
  marker="fuzz/artifacts/.$t.start"
  touch "$marker"
  start=$(date +%s.%N)
  set +e
  cargo fuzz run --features libfuzzer --sanitizer "$sanitizer" --debug-assertions "$t" "$corpus" "fuzz/seeds/$t" -- \
    -runs="$execs" -timeout=20 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" >"$log" 2>&1
  rc=$?
  set -e
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  crashes=$(find "$artifacts" -type f -newer "$marker" | wc -l)
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
    # A failure that left no artifact (e.g. a build error) is still a failure: show why.
    echo "fuzz target $t failed (exit $rc) without a crash input; last lines of $log:" >&2
    tail -20 "$log" >&2
    crashes=1
  fi
  total_crashes=$((total_crashes + crashes))
  printf '%-15s %10s %8s %8s\n' "$t" "${runs:-0}" "$secs" "$crashes"
  if [ -n "$summary" ]; then
    printf '{"target": "%s", "execs": %s, "seconds": %s, "crashes": %s, "exit": %s}\n' \
      "$t" "${runs:-0}" "$secs" "$crashes" "$rc" >>"$summary"
  fi
  if [ "$crashes" -gt 0 ]; then
    find "$artifacts" -type f -newer "$marker" -printf '  crash input: %p\n'
    grep -m3 -E 'panicked at|ERROR: AddressSanitizer|SUMMARY' "$log" | sed 's/^/  /' || true
  fi
done
echo "total crashes: $total_crashes"
[ "$total_crashes" -eq 0 ]
